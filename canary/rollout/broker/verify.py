"""Verify of a broker rollout: the cluster is in the promised state, a probe is green, the lock is released."""

from __future__ import annotations

import contextlib

from canary.kafka.wait import WaitTimeout, wait_until
from canary.rollout.broker.desired import desired_state, is_as_desired
from canary.rollout.broker.probes import green_probe
from canary.rollout.broker.rolling import cluster_health, quorum_missing
from canary.rollout.broker.rollout import Rollout
from canary.rollout.core import RolloutError, RunStatus
from canary.rollout.core.audit import AuditAction
from canary.rollout.leaders import leader_diff, leaders


def verify(run: Rollout) -> dict:
    """Checks the promised state: after a rollback the cluster equals the snapshot (versions, configs, racks,
    finalized features, leaders); after a promotion every broker runs the change; either way every broker and
    controller runs and the quorum is caught up. Then a green probe; then the lock is released."""
    status = run.state.status
    if not status.finished or status.verified:
        raise RolloutError(f"nothing to verify yet: the rollout is at '{status}'; promote or roll back first")
    finalized = run.admin.features().finalized
    differences = fleet_differences(run, status) + _cluster_differences(run, status, finalized)
    if differences:
        run.audit.record("verify", AuditAction.DIFFERENCES, differences=differences)
        raise RolloutError("verify failed, the lock stays held until this is fixed: " + "; ".join(differences))
    probe = green_probe(run, "verify")
    released = run.lock.release(run.run_id)
    run.audit.record("verify", AuditAction.LOCK_RELEASED if released else AuditAction.LOCK_NOT_HELD)
    run.state.update(status=status.as_verified())
    return {"status": status, "finalized": finalized, "probe": probe, "lock_released": released}


def fleet_differences(run: Rollout, status: RunStatus) -> list[str]:
    """Brokers and controllers not on what `status` promised: the change, or the snapshot."""
    rolled_back = not status.promoted
    differences = []
    for b in run.deployer.brokers():
        want = desired_state(run, b.broker_id, "baseline" if rolled_back else "promoted")
        if not is_as_desired(b, want):
            differences.append(f"broker {b.broker_id} is {b.to_dict()}, expected {want}")
    before, target = run.snapshot, run.spec.change.version
    for c in run.deployer.controllers():
        want_version = before.controller(c.node_id).version if rolled_back or not target else target
        if c.version != want_version:
            differences.append(f"controller {c.node_id} runs {c.version}, expected {want_version}")
    # Every controller running, as preflight found them (a controller that crashed during the rollout leaves the
    # quorum one failure from unavailable, whatever the brokers look like).
    return differences + [f"controller {c.node_id} is not running" for c in run.deployer.controllers()
                          if not c.running]


def _cluster_differences(run: Rollout, status: RunStatus, finalized: dict[str, int]) -> list[str]:
    """After a rollback: features and leaders as before. Always: the cluster healthy, the quorum caught up."""
    before = run.snapshot
    differences = []
    if not status.promoted:
        if finalized != before.features:
            differences.append(f"finalized features are {finalized}, before the rollout {before.features}")
        was = before.leader_map()
        with contextlib.suppress(WaitTimeout):  # leaders settle a moment after the elections
            wait_until("leaders as before", 60,
                       lambda: "; ".join(leader_diff(was, leaders(run))) or None, run.progress)
        differences += leader_diff(was, leaders(run))
    with contextlib.suppress(WaitTimeout):  # a controller started a moment ago catches up
        wait_until("controllers caught up with the quorum", 60, lambda: quorum_missing(run), run.progress)
    seen = cluster_health(run)
    return differences + ([] if seen.healthy else [f"cluster not healthy: {seen.reason()}"])
