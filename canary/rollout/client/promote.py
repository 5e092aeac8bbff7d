"""Promote and rollback of a client rollout, and why in this order: see the package docstring."""

from __future__ import annotations

import contextlib

from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as TP

from canary.kafka.clients import QUIET_LOGGER
from canary.kafka.wait import WaitTimeout, wait_until
from canary.rollout.client.fleet import converge, remove
from canary.rollout.client.lane import canary_partitions_now, close_lane
from canary.rollout.client.rollout import ClientRollout, fleet
from canary.rollout.core import RolloutError, RunStatus
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
    """Waits until the group's committed offsets reach the end of `partitions` (the canary consumers processed
    everything the canary producers wrote). Returns the records still not committed per partition."""
    consumer = Consumer({"bootstrap.servers": run.bootstrap_servers, "group.id": run.spec.service.group,
                         "enable.auto.commit": False, "logger": QUIET_LOGGER, **run.spec.client})
    left: dict[int, int] = {}
    try:
        def check() -> str | None:
            committed = consumer.committed([TP(run.topic, p) for p in partitions], timeout=10)
            left.clear()
            for tp in committed:
                high = consumer.get_watermark_offsets(TP(run.topic, tp.partition), timeout=10, cached=False)[1]
                behind = high - max(tp.offset, 0)
                if behind > 0:
                    left[tp.partition] = behind
            return f"records not yet committed: {left}" if left else None
        with contextlib.suppress(WaitTimeout):
            wait_until("canary consumers draining the canary partitions", run.spec.timeouts.drain, check,
                       run.progress)
    finally:
        consumer.close()
    return dict(left)


def rollback(run: ClientRollout) -> dict:
    """Canary producers stop, canary consumers drain the canary partitions, the lane closes, the canary consumers
    stop, and any baseline instance not on the `from` version goes back to it."""
    if run.state.before is None:
        raise RolloutError("nothing to roll back: preflight never recorded the pre-rollout state")
    canary = fleet(run.spec, run.spec.change.to, "canary")
    result: dict = {"stopped": remove(run, [i for i in canary if i.role == "producer"])}
    opened = canary_partitions_now(run)
    if opened and any(i.role == "consumer" and (s := run.services.status(i.name)) and s.running for i in canary):
        left = drain(run, opened)
        run.audit.record(run.step, "drained" if not left else "drain incomplete", partitions=opened, left=left)
        if left:
            run.say("canary partitions %s not drained after %.0fs: %s records go to the baseline consumers", opened,
                  run.spec.timeouts.drain, sum(left.values()))
        result["drain_left"] = left
    result.update(close_lane(run))
    result["stopped"] += remove(run, [i for i in canary if i.role == "consumer"])
    result["rolled"] = converge(run, fleet(run.spec, run.spec.change.from_))
    run.state.update(status=RunStatus.ROLLED_BACK)
    return result
