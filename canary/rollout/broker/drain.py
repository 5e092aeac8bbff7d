"""Draining a batch before it restarts: the leadership of its brokers' partitions moved to brokers that stay up, as
Cruise Control's demote does (the batch's replicas last in each partition's preference order, then preferred
elections; no data moves). Clients then switch leaders while every broker still runs, not during the controlled
shutdown; once the batch is back in every ISR the original orders return and the preferred leaders are elected.

The original orders are written to run.json (`drained`) before any is changed, so a promotion cut off midway gives
them back on its next run, and a rollback does too (undrain)."""

from __future__ import annotations

from collections.abc import Collection

from canary.kafka.admin import ROLLOUT_LOCK_TOPIC
from canary.rollout.broker.rollout import Rollout
from canary.rollout.core.audit import AuditAction
from canary.rollout.guard import PartitionView
from canary.rollout.leaders import reorder

DRAIN_TIMEOUT = 60.0  # for the reorders to show and the elections to take; what is still led then, the shutdown moves


def demoted(partitions: list[PartitionView], batch: Collection[int]) -> dict[str, list[int]]:
    """The new replica order of each partition a broker of `batch` leads and another in-sync replica could: the
    in-sync replicas outside the batch first, then the others outside it, then the batch's (each group in its
    order). A partition only the batch can lead is left as it is (no one else could take it)."""
    orders = {}
    for p in partitions:
        if p.topic == ROLLOUT_LOCK_TOPIC or p.leader not in batch:
            continue
        stay = [b for b in p.replicas if b not in batch]
        in_sync = [b for b in stay if b in p.isr]
        if in_sync:
            orders[p.name] = in_sync + [b for b in stay if b not in in_sync] + [b for b in p.replicas if b in batch]
    return orders


def still_leading(partitions: list[PartitionView], batch: Collection[int]) -> list[str]:
    """The partitions a broker of `batch` still leads though another in-sync replica could."""
    return sorted(demoted(partitions, batch))


def drain(run: Rollout, batch: list[int]) -> dict:
    """Moves the leadership of what `batch` leads to in-sync replicas outside it; records the original orders
    first. Returns how many partitions moved and which a batch broker still leads (the shutdown moves those)."""
    views = run.partitions()
    orders = demoted(views, batch)
    if not orders:
        return {"drained": 0, "still_leading": []}
    was = {p.name: list(p.replicas) for p in views if p.name in orders}
    run.state.update(drained=was | (run.state.record.drained or {}))  # an order recorded earlier is the original
    run.say("draining brokers %s: leadership of %d partition(s) to replicas that stay up", batch, len(orders))
    reorder(run, orders, AuditAction.DRAIN, DRAIN_TIMEOUT)
    left = still_leading(run.partitions(), batch)
    result = {"drained": len(orders) - len(left), "still_leading": left}
    run.audit.record(run.step, AuditAction.DRAINED, brokers=batch, **result)
    return result


def undrain(run: Rollout) -> list[str]:
    """Gives every drained partition its original replica order back and elects its preferred leader; forgets the
    record once done. Idempotent: nothing recorded, nothing to do. Returns the partitions restored."""
    was = run.state.record.drained
    if not was:
        return []
    now = {p.name: p for p in run.partitions()}
    # a partition deleted, or reassigned by someone else meanwhile, keeps what it has now
    back = {n: reps for n, reps in was.items() if n in now and sorted(now[n].replicas) == sorted(reps)}
    off = reorder(run, back, AuditAction.UNDRAIN, DRAIN_TIMEOUT) if back else []
    if off:
        run.say("preferred leaders not yet back on %d partition(s) (%s): they are elected again at the end",
                len(off), ", ".join(off[:5]))
    run.state.update(drained=None)
    return sorted(back)
