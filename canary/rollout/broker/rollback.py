"""The rollback of a broker rollout: every changed broker and controller back to the pre-rollout snapshot (canaries
first) under the guards and warm-up, preferred leaders restored; refused once feature levels were finalized."""

from __future__ import annotations

from canary.rollout.broker.drain import undrain
from canary.rollout.broker.probes import watched
from canary.rollout.broker.rolling import roll_controllers, roll_fleet
from canary.rollout.broker.rollout import Rollout
from canary.rollout.core import RolloutError, RunStatus
from canary.rollout.leaders import restore_preferred


def raised_features(run: Rollout) -> dict[str, list[int]]:
    now = run.admin.features().finalized
    before = run.snapshot.features
    return {f: [before.get(f, 0), level] for f, level in now.items() if level > before.get(f, 0)}


def rollback(run: Rollout) -> dict:
    """Brings every changed broker back to its pre-rollout version, config and rack (canaries first), under the
    guard and warm-up; restores preferred leaders. Refused once features were finalized."""
    if run.state.before is None:
        raise RolloutError("nothing to roll back: preflight never recorded the pre-rollout state")
    raised = raised_features(run)
    if raised:
        detail = ", ".join(f"{f} {a}→{b}" for f, (a, b) in raised.items())
        raise RolloutError(f"refusing to roll back: feature levels were finalized ({detail}) and finalized levels "
                           f"cannot go down, so brokers on the old version would not start; roll forward instead")
    canaries = run.canary_ids()
    order = canaries + [b.broker_id for b in run.deployer.brokers() if b.broker_id not in canaries]
    before = run.snapshot
    result: dict = {}
    with watched(run, "rollback", result):
        result["undrained"] = undrain(run)  # a promotion cut off midway may have left partitions drained
        result["rolled"] = roll_fleet(run, order, "baseline", warm=True)
        result["controllers"] = roll_controllers(run, lambda c: before.controller(c.node_id).version)
    result["elected"] = restore_preferred(run)
    run.state.update(status=RunStatus.ROLLED_BACK)
    return result
