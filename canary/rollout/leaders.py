"""Partition leadership in a rollout: preferred leader elections repeated until the chosen partitions are led by
their preferred replica (a replica still catching up is not electable yet), and the leaders as a snapshot shows them."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

from canary.kafka.admin import ROLLOUT_LOCK_TOPIC
from canary.kafka.wait import POLL, wait_until
from canary.rollout import guard
from canary.rollout.core import ClusterRun
from canary.rollout.core.audit import AuditAction

ELECTION_SETTLE = 2 * POLL  # how long an election is looked for before what is still off is elected again
SETTLE_POLL = 0.2  # seconds between two looks at the metadata after an election or a reorder


def leaders(run: ClusterRun) -> dict[str, dict]:
    return {p.name: {"leader": p.leader, "preferred": p.replicas[0] if p.replicas else -1}
            for p in run.partitions() if p.topic != ROLLOUT_LOCK_TOPIC}


def orders_avoiding(partitions: Iterable[guard.PartitionView], topic: str, avoid: Iterable[int]
                    ) -> dict[str, list[int]]:
    """The replica orders that make a broker outside `avoid` the preferred leader of each of `topic`'s partitions
    now preferring one in it: the same replicas (no data moves), those in `avoid` moved last. A partition whose every
    replica is in `avoid` is left as it is."""
    avoided = set(avoid)
    orders = {}
    for p in partitions:
        if p.topic != topic or not p.replicas or p.replicas[0] not in avoided:
            continue
        order = [r for r in p.replicas if r not in avoided] + [r for r in p.replicas if r in avoided]
        if order[0] not in avoided:
            orders[p.name] = order
    return orders


def keep_leaders_off(run: ClusterRun, topic: str, avoid: list[int], timeout: float) -> list[str]:
    """`topic`'s partitions led by a broker outside `avoid`, preferred so (orders_avoiding), so that an election or
    a restart never gives one to a broker in `avoid`. Returns the partitions still led from `avoid` (empty when
    done)."""
    orders = orders_avoiding(run.partitions(), topic, avoid)
    if orders:
        reorder(run, orders, AuditAction.KEEP_LEADERS_OFF, timeout)

    def led_from_avoided(parts: list[guard.PartitionView]) -> list[str]:
        return [p.name for p in parts if p.topic == topic and p.leader in avoid and p.replicas
                and p.replicas[0] not in avoid]
    _, off = elect_until_led(run, led_from_avoided, timeout=timeout)  # a failover left one there
    return off


def elect_preferred(run: ClusterRun, names: list[str]) -> list[str]:
    """Preferred leader elections for `topic-partition` names; returns failures."""
    failures = []
    for topic, parts in sorted(_by_topic(names).items()):
        failures += run.admin.elect(topic, parts)
    return failures


def elect_until_led(run: ClusterRun, select: Callable[[list[guard.PartitionView]], list[str]], timeout: float = 60.0
                    ) -> tuple[list[str], list[str]]:
    """Preferred leader elections for the partitions `select` picks, repeated until none is left or `timeout`
    passes (a preferred replica still catching up is not electable yet). Returns (elected, still off)."""
    elected: list[str] = []
    deadline = time.monotonic() + timeout
    off = select(run.partitions())
    while off and time.monotonic() <= deadline:
        run.say("preferred leader election for %d partition(s)", len(off))
        failures = elect_preferred(run, off)
        run.audit.record(run.step, AuditAction.PREFERRED_ELECTION, partitions=off, failures=failures)
        elected += [n for n in off if n not in elected]
        # A KRaft election shows in the metadata within milliseconds: looked for every SETTLE_POLL, so a roll does
        # not wait a fixed pause per election; what is still off after ELECTION_SETTLE is elected again.
        settled = time.monotonic() + ELECTION_SETTLE
        while (off := select(run.partitions())) and time.monotonic() < settled:
            time.sleep(SETTLE_POLL)
    return elected, off


def reorder(run: ClusterRun, targets: dict[str, list[int]], action: AuditAction, timeout: float) -> list[str]:
    """Reorders the replica lists of `targets` (partition name -> replicas, the same sets: no data moves), waits
    until the metadata shows them, then elects preferred leaders until the first replica leads each. Returns the
    partitions still not led by their first replica (empty when done)."""
    now = {p.name: p for p in run.partitions()}
    todo = {name: reps for name, reps in targets.items() if list(now[name].replicas) != reps}
    if todo:
        run.audit.record(run.step, action, reassign=todo, was={name: list(now[name].replicas) for name in todo})
        for topic, parts in _by_topic(todo).items():
            run.admin.reassign(topic, {p: todo[f"{topic}-{p}"] for p in parts})

    def shown() -> str | None:
        seen = {p.name: p for p in run.partitions()}
        moving = {f"{t}-{n}" for t, n in run.admin.reassignments()}
        off = sorted(n for n, reps in targets.items() if list(seen[n].replicas) != reps or n in moving)
        return f"replica order of {len(off)} partition(s) not updated yet ({', '.join(off[:5])})" if off else None
    wait_until(action, timeout, shown, run.progress, poll=SETTLE_POLL)
    _, off = elect_until_led(run, lambda parts: [p.name for p in parts if p.name in targets and p.replicas
                                                 and p.leader != p.replicas[0]], timeout=timeout)
    return off


def _by_topic(names: Iterable[str]) -> dict[str, list[int]]:
    """`topic-partition` names grouped by topic, each topic's partitions sorted."""
    by_topic: dict[str, list[int]] = {}
    for name in names:
        topic, _, part = name.rpartition("-")
        by_topic.setdefault(topic, []).append(int(part))
    return {topic: sorted(parts) for topic, parts in by_topic.items()}


def restore_preferred(run: ClusterRun) -> list[str]:
    """Every partition back on its preferred leader (bounded wait); returns the partitions elected."""
    elected, _ = elect_until_led(run, lambda parts: [p.name for p in parts if p.topic != ROLLOUT_LOCK_TOPIC
                                                    and p.replicas and p.leader != p.replicas[0]])
    return elected


def leader_diff(before: dict, now: dict) -> list[str]:
    """Partitions that were on their preferred leader before and are not on the same leader now."""
    return [f"{name} led by {now.get(name, {}).get('leader')}, before by {p['leader']}"
            for name, p in sorted(before.items())
            if p["leader"] == p["preferred"] and now.get(name, {}).get("leader") != p["leader"]]
