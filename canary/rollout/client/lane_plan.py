"""Opening and closing the canary lane of a service topic, planned (pure) from the topic's replica lists.

Canary partitions of a service topic exist only during a client rollout (the KIP's canary isolation, docs/design.md):

- **open**: for K partitions that have a replica on a canary broker, that replica goes first in the replica list and
  a preferred leader election makes it the leader. A reassignment that only reorders the same replicas moves no
  data; the partitions are canary partitions once their leader is the canary broker.
- **close**: the original replica lists (recorded before the first change) come back and preferred leader
  elections put leadership on baseline brokers again: no canary partition is left.

Both plans are functions of the observed replica lists, so a retried step plans the same thing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from canary.errors import CanaryError

Replicas = Mapping[int, tuple[int, ...] | list[int]]


class LanePlanError(CanaryError):
    """No canary lane can be opened on this topic; the message says why and what to do."""


def candidates(replicas: Replicas, canary_brokers: Iterable[int]) -> list[int]:
    """Partitions with a replica on a canary broker, sorted."""
    canaries = set(canary_brokers)
    return sorted(p for p, reps in replicas.items() if canaries & set(reps))


def plan_open(replicas: Replicas, canary_brokers: Iterable[int], count: int, topic: str = "the topic"
              ) -> dict[int, list[int]]:
    """The replica lists that make `count` partitions canary partitions: {partition: replicas with a canary broker
    first}. Picks the candidates round robin over the canary brokers (so several canary brokers share the lane),
    lowest partition first. Raises LanePlanError when there is no candidate, too few, or no partition would be left
    for the baseline lane."""
    canaries = sorted(set(canary_brokers))
    if not canaries:
        raise LanePlanError("the cluster has no canary broker; mark one with `kafka-canary cluster restart-broker ID "
                            "--rack canary-broker` (the canary marker travels in broker.rack, see canary/lanes.py)")
    found = candidates(replicas, canaries)
    if not found:
        raise LanePlanError(f"{topic} has no replica on the canary broker(s) {canaries}, so no canary partition "
                            f"can be opened; reassign replicas of {topic} onto a canary broker, or mark a broker "
                            f"that hosts them")
    if count >= len(replicas):
        raise LanePlanError(f"lane.partitions: {count} canary partition(s) of a {len(replicas)}-partition topic "
                            f"leaves no baseline partition; choose at most {len(replicas) - 1}")
    if len(found) < count:
        raise LanePlanError(f"lane.partitions: {count} canary partitions asked, but only {len(found)} partition(s) "
                            f"of {topic} ({found}) have a replica on a canary broker {canaries}")
    by_broker = {b: [p for p in found if b in replicas[p]] for b in canaries}
    chosen: dict[int, int] = {}  # partition -> the canary broker that will lead it
    while len(chosen) < count:
        for broker in canaries:
            free = [p for p in by_broker[broker] if p not in chosen]
            if free and len(chosen) < count:
                chosen[free[0]] = broker
    return {p: [b] + [r for r in replicas[p] if r != b] for p, b in sorted(chosen.items())}


def plan_restore(original: Replicas, now: Replicas) -> dict[int, list[int]]:
    """The reassignments that bring every partition whose replica list changed back to `original`."""
    return {p: list(reps) for p, reps in sorted(original.items()) if tuple(now.get(p, ())) != tuple(reps)}


def canary_partitions(leaders: Mapping[int, int], canary_brokers: Iterable[int]) -> list[int]:
    """Partitions whose leader is a canary broker: the canary lane as it is now."""
    canaries = set(canary_brokers)
    return sorted(p for p, leader in leaders.items() if leader in canaries)
