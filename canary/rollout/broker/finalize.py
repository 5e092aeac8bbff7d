"""The finalize step of a broker rollout: the release's feature levels raised once the verified promoted fleet has
baked (`promote.bake`) and a clean look passes; before that it is refused, saying until when. Rolling binaries back
is safe only before it (KIP-584: finalized levels only go up)."""

from __future__ import annotations

import time

from canary.cluster import distribution
from canary.fields import format_duration, format_utc
from canary.kafka import features
from canary.rollout.broker.probes import green_probe
from canary.rollout.broker.rolling import cluster_health
from canary.rollout.broker.rollout import Rollout
from canary.rollout.broker.verify import fleet_differences
from canary.rollout.core import RolloutError
from canary.rollout.core.audit import AuditAction


def finalize_fleet(run: Rollout) -> dict:
    """The finalize step: raises the release's feature levels once the verified promoted fleet has run for
    `promote.bake` after promote finished, with a clean look first (every broker and controller on the change and
    running, the cluster healthy and the quorum caught up, a green probe), under the cluster's lock. Refused before
    the bake, saying until when; idempotent (levels already raised change nothing)."""
    status = run.state.status
    waiting = not_due(run)
    if waiting:
        raise RolloutError(waiting)
    target = run.spec.change.version
    if not target or not run.spec.finalize:
        why = "the change keeps the release" if not target else "the spec says finalize: false"
        return {"finalized": {}, "why": f"{why}: no feature level is raised"}
    problems = fleet_differences(run, status)
    seen = cluster_health(run)
    if not seen.healthy:
        problems.append(f"cluster not healthy: {seen.reason()}")
    if problems:
        raise RolloutError("not finalized, the cluster is not as promoted: " + "; ".join(problems))
    taken = run.lock.acquire(run.run_id, len(run.deployer.brokers()))  # LockHeld when another rollout runs
    try:
        probe = green_probe(run, "finalize")
        finalized = finalize(run, target)
    finally:
        if taken:
            run.lock.release(run.run_id)
    return {"finalized": finalized, "probe": probe}


def not_due(run: Rollout) -> str | None:
    """Why finalize cannot run now, or None: the rollout is not a verified promotion yet, or the promoted fleet is
    still baking (a change that keeps the release, or finalize: false, is due at once and raises nothing). The
    finalize step refuses with this; the DAG's finalize task is skipped with it."""
    status = run.state.status
    if not status.promoted or not status.verified:
        return f"nothing to finalize yet: the rollout is at '{status}'; finalize follows a verified promotion"
    return still_baking(run) if run.spec.change.version and run.spec.finalize else None


def still_baking(run: Rollout) -> str | None:
    """Why finalize must wait (the promoted fleet is still baking, until when), or None once the bake is over."""
    now = time.time() * 1000
    due = _bake_ends_ms(run, now)
    if now >= due:
        return None
    return (f"the promoted fleet bakes until {format_utc(due)} ({(due - now) / 1000:.0f} s more; promote.bake "
            f"{format_duration(run.spec.promote.bake)}): finalize then. Until then the feature levels stay as they "
            f"were and brokers of the previous release can still join")


def _bake_ends_ms(run: Rollout, now_ms: float) -> float:
    """When the bake ends: `promote.bake` after promote finished (`now_ms` before promote has finished)."""
    record = run.state.record.step("promote")
    finished = record.finished_ms if record and record.finished_ms else now_ms
    return finished + run.spec.promote.bake * 1000



def finalize(run: Rollout, version: str) -> dict:
    levels = distribution.release_levels(distribution.release_of(version), distribution.ensure(
        max((version, distribution.TARGET_VERSION), key=distribution.parse_version)))
    wanted = {k: v for k, v in levels.items() if k not in features.NOT_BY_DEFAULT and v > 0}
    changes = run.admin.finalize(wanted)
    if changes:
        run.audit.record("promote", AuditAction.FINALIZE, changes={k: list(v) for k, v in changes.items()})
    return {k: list(v) for k, v in changes.items()}
