"""Promote and rollback of a client rollout, and why in this order: see the package docstring."""

from __future__ import annotations

import contextlib

from canary.kafka.group_offsets import end_offsets, group_reader, short_of
from canary.kafka.wait import WaitTimeout, wait_until
from canary.rollout.client.fleet import converge, remove
from canary.rollout.client.lane import canary_partitions_now, close_lane
from canary.rollout.client.rollout import ClientRollout, fleet
from canary.rollout.core import RolloutError, RunStatus
from canary.rollout.core.audit import AuditAction
from canary.rollout.core.verdict import require_promotable


def promote(run: ClientRollout, approve: bool = False) -> dict:
    """Baseline instances to the target version one at a time, then the lane closes, then the canary instances
    stop (their consumers commit; the baseline takes the canary partitions over at those commits)."""
    require_promotable(run, approve)
    rolled = converge(run, fleet(run.spec, run.spec.change.to))
    closed = close_lane(run)
    canary = fleet(run.spec, run.spec.change.to, "canary")
    stopped = remove(run, [i for i in canary if i.role == "producer"]) + remove(
        run, [i for i in canary if i.role == "consumer"])
    run.state.update(status=RunStatus.PROMOTED)
    return {"rolled": rolled, **closed, "stopped": stopped}


def drain(run: ClientRollout, partitions: list[int]) -> dict:
    """Waits until the group's committed offsets reach where `partitions` ended when the drain began, right after the
    canary producers stopped: everything the canary producers wrote is processed by the canary consumers, and what
    other producers write meanwhile is left to the baseline (waiting for the moving end kept the bad version
    processing for the whole `timeouts.drain` while upstream wrote). Returns the records short of that end per
    partition."""
    left: dict[int, int] = {}
    with group_reader(run.bootstrap_servers, run.spec.client, run.spec.service.group) as consumer:
        horizon = end_offsets(consumer, run.topic, partitions)

        def check() -> str | None:
            left.clear()
            left.update(short_of(consumer, run.topic, horizon))
            return f"records the canary producers wrote not yet committed: {left}" if left else None
        with contextlib.suppress(WaitTimeout):
            wait_until("canary consumers draining the canary partitions", run.spec.timeouts.drain, check,
                       run.progress)
    return dict(left)


def rollback(run: ClientRollout) -> dict:
    """Canary producers stop; canary consumers drain what the canary producers wrote (a service without producer
    instances has nothing there: its canary consumers stop at once); the lane closes; the canary consumers stop; any
    baseline instance not on the `from` version goes back to it."""
    if run.state.before is None:
        raise RolloutError("nothing to roll back: preflight never recorded the pre-rollout state")
    canary = fleet(run.spec, run.spec.change.to, "canary")
    consumers = [i for i in canary if i.role == "consumer"]
    result: dict = {"stopped": remove(run, [i for i in canary if i.role == "producer"])}
    opened = canary_partitions_now(run)
    if not run.spec.service.producers:
        # No canary producer wrote into the canary partitions: the canary consumers stop at once (committing what
        # they processed) and the baseline takes the partitions over at those commits when the lane closes.
        result["stopped"] += remove(run, consumers)
    elif opened and any((s := run.services.status(i.name)) and s.running for i in consumers):
        left = drain(run, opened)
        run.audit.record(run.step, AuditAction.DRAINED if not left else AuditAction.DRAIN_INCOMPLETE, partitions=opened,
                         left=left)
        if left:
            run.say("canary partitions %s not drained after %.0fs: %s records go to the baseline consumers", opened,
                  run.spec.timeouts.drain, sum(left.values()))
        result["drain_left"] = left
    result.update(close_lane(run))
    result["stopped"] += remove(run, consumers)
    result["rolled"] = converge(run, fleet(run.spec, run.spec.change.from_))
    run.state.update(status=RunStatus.ROLLED_BACK)
    return result
