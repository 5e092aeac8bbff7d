"""The canary lane of the service topic: opened by putting a canary broker first in the replica lists of the
planned partitions and electing it (no data moves), closed by restoring the original order."""

from __future__ import annotations

from canary import lanes
from canary.kafka.admin import TopicState
from canary.rollout.client import lane_plan
from canary.rollout.client.rollout import ClientRollout
from canary.rollout.core import RolloutError, RunStatus
from canary.rollout.core.audit import AuditAction
from canary.rollout.leaders import reorder


def canary_brokers(state: TopicState) -> list[int]:
    return sorted(b for b, rack in state.brokers.items() if lanes.broker_lane(rack) == "canary")


def replicas(state: TopicState) -> dict[int, list[int]]:
    return {p: list(s.replicas) for p, s in sorted(state.partitions.items())}


def move_leadership(run: ClientRollout, targets: dict[int, list[int]], action: AuditAction) -> list[str]:
    """Reorders the service topic's replica lists to `targets` (same replica sets: no data moves) and elects the
    first replica of each (canary.rollout.leaders.reorder). Returns the partitions still not led by their first
    replica (empty when done)."""
    return reorder(run, {f"{run.topic}-{p}": reps for p, reps in targets.items()}, action,
                   run.spec.timeouts.lane)


def canary_partitions_now(run: ClientRollout) -> list[int]:
    state = run.observe()
    before = run.state.record.before
    canaries = set(before.canary_brokers) if before else set(canary_brokers(state))
    return lane_plan.canary_partitions({p: s.leader for p, s in state.partitions.items()}, canaries)


def open_lane(run: ClientRollout) -> dict:
    """Puts a canary broker first in the replica lists of the planned partitions and elects it leader: those are
    the canary partitions of the rollout. Baseline consumers let go of them at their commits."""
    plan = run.snapshot.lane_plan()
    off = move_leadership(run, plan, AuditAction.OPEN_LANE)
    opened = canary_partitions_now(run)
    if sorted(plan) != opened:
        raise RolloutError(f"the canary lane did not open as planned: canary partitions are {opened}, planned "
                           f"{sorted(plan)} (not led by their canary broker: {off})")
    run.state.update(status=RunStatus.LANE_OPEN)
    run.audit.record(run.step, AuditAction.LANE_OPEN, topic=run.topic, partitions=opened)
    return {"canary_partitions": opened}


def close_lane(run: ClientRollout) -> dict:
    original = run.snapshot.original_replicas()
    opened = sorted(run.snapshot.lane_plan())
    targets = {p: original[p] for p in opened} | lane_plan.plan_restore(original, replicas(run.observe()))
    off = move_leadership(run, targets, AuditAction.CLOSE_LANE)
    left = canary_partitions_now(run)
    if left:
        raise RolloutError(f"the canary lane of {run.topic} did not close: partitions {left} are still led by a canary "
                           f"broker (not led by their first replica: {off}); run the step again")
    run.audit.record(run.step, AuditAction.LANE_CLOSED, topic=run.topic, partitions=opened)
    return {"closed": opened}
