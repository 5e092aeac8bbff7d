"""Verify of a client rollout: every instance on its promised version, no canary instance or partition left,
the replica order as before; then the lock is released."""

from __future__ import annotations

import contextlib

from canary.kafka.wait import WaitTimeout, wait_until
from canary.rollout.client import lane_plan
from canary.rollout.client.fleet import fleet_differences
from canary.rollout.client.lane import canary_partitions_now, replicas
from canary.rollout.client.rollout import ClientRollout, fleet
from canary.rollout.core import RolloutError
from canary.rollout.core.audit import AuditAction


def verify(run: ClientRollout) -> dict:
    """Checks the promised state: every baseline instance running on its promised version (the target after a
    promotion, `from` after a rollback), no canary instance left, the original replica order back, no canary
    partition. Then releases the lock."""
    status = run.state.status
    if not status.finished or status.verified:
        raise RolloutError(f"nothing to verify yet: the rollout is at '{status}'; promote or roll back first")
    version = run.spec.change.to if status.promoted else run.spec.change.from_
    differences = fleet_differences(run, fleet(run.spec, version))
    differences += [f"canary instance {s.instance.name} is still {'running' if s.running else 'known'}"
                    for s in run.services.instances() if s.instance.lane == "canary"]
    original = run.snapshot.original_replicas()
    now = replicas(run.observe())
    differences += [f"{run.topic}-{p} has replicas {now.get(p)}, before {reps}"
                    for p, reps in lane_plan.plan_restore(original, now).items()]
    with contextlib.suppress(WaitTimeout):
        wait_until("no canary partition", 30,
                   lambda: f"canary partitions {left}" if (left := canary_partitions_now(run)) else None, run.progress)
    left = canary_partitions_now(run)
    if left:
        differences.append(f"canary partitions {left} of {run.topic} are still led by a canary broker")
    if differences:
        run.audit.record("verify", AuditAction.DIFFERENCES, differences=differences)
        raise RolloutError("verify failed, the lock stays held until this is fixed: " + "; ".join(differences))
    released = run.lock.release(run.run_id)
    run.audit.record("verify", AuditAction.LOCK_RELEASED if released else AuditAction.LOCK_NOT_HELD)
    run.state.update(status=status.as_verified())
    return {"status": status, "version": version, "lock_released": released}
