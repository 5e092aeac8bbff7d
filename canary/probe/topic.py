"""Reconciling the canary topic to its rules (after the Strimzi canary proposal):

- one partition per live broker, each broker the preferred leader (first replica) of one;
- RF = min(brokers, 3), `min.insync.replicas` = max(1, RF - 1), small segment and retention bytes;
- followers spread over all brokers, interleaved by rack when racks are set;
- scale up: a new broker takes over an orphaned partition if there is one, else gets a new one;
- scale down: the partitions of gone brokers become orphans: kept (partitions cannot be
  removed), their replicas moved onto live brokers, never produced to;
- leaders off their preferred broker are put back by a preferred leader election.

`plan()` is pure: (spec, observed state) -> the changes. A plan with nothing to do makes no
admin call that changes anything (the Strimzi canary reassigned on every pass and its users saw
1–2 s produce latency from it). Acceptable replica sets are kept as they are, so a reconcile
never shuffles a healthy topic.
"""

from __future__ import annotations

import functools
import time
from dataclasses import asdict, dataclass, field

from canary.errors import ClusterError
from canary.kafka.admin import TopicAdmin, TopicState
from canary.lanes import real_rack

SEGMENT_BYTES = 4 * 1024 * 1024
RETENTION_BYTES = 16 * 1024 * 1024
RETENTION_MS = 6 * 3600 * 1000


@dataclass(frozen=True)
class TopicSpec:
    name: str
    segment_bytes: int | None = SEGMENT_BYTES   # None: the brokers' log.segment.bytes
    retention_bytes: int = RETENTION_BYTES
    retention_ms: int = RETENTION_MS
    segment_ms: int | None = None                # None: the brokers' log.roll.ms

    def configs(self, rf: int) -> dict[str, str]:
        sizes = {"segment.bytes": self.segment_bytes, "segment.ms": self.segment_ms}
        return {"min.insync.replicas": str(max(1, rf - 1)), **{k: str(v) for k, v in sizes.items() if v is not None},
                "retention.bytes": str(self.retention_bytes), "retention.ms": str(self.retention_ms)}


@dataclass(frozen=True)
class ReconcilePlan:
    replication_factor: int
    create: list[list[int]] | None              # full assignment when the topic is missing
    add_partitions: list[list[int]]             # new partitions' replicas, in partition order
    reassign: dict[int, list[int]]
    elect: list[int]                            # preferred leader elections
    configs: dict[str, str]                     # topic configs to set
    owners: dict[int, int]                      # broker -> the partition it leads (preferred)
    orphans: list[int]                          # partitions no live broker owns: not produced to

    @property
    def changes_anything(self) -> bool:
        return bool(self.create or self.add_partitions or self.reassign or self.elect or self.configs)


@dataclass
class ReconcileResult:
    """JSON-able: what reconcile found and changed."""
    topic: str
    changed: bool
    created: bool
    partitions_added: list[int]
    reassigned: dict[int, list[int]]
    elected: list[int]
    configs_set: dict[str, str]
    owners: dict[int, int]
    orphans: list[int]
    replication_factor: int
    errors: list[str] = field(default_factory=list)

    @property
    def produce_partitions(self) -> dict[int, int]:
        """partition -> its preferred leader broker, for every partition the probe produces to."""
        return {p: b for b, p in self.owners.items()}

    def to_dict(self) -> dict:
        return asdict(self)


# ----- the pure part -----

def rack_interleaved(brokers: dict[int, str | None]) -> list[int]:
    """Broker ids ordered so that neighbours sit in different racks: one broker of each rack in
    turn (racks and brokers sorted), so a partition's replicas taken from consecutive positions
    land in as many racks as possible. Without racks this is the sorted id list."""
    by_rack: dict[str, list[int]] = {}
    for broker in sorted(brokers):
        by_rack.setdefault(real_rack(brokers[broker]) or "", []).append(broker)
    queues = [by_rack[r] for r in sorted(by_rack)]
    order: list[int] = []
    while any(queues):
        for queue in queues:
            if queue:
                order.append(queue.pop(0))
    return order


def _rack_count(brokers: dict[int, str | None], ids) -> int:
    return len({real_rack(brokers[b]) or "" for b in ids})


def _acceptable(replicas: tuple[int, ...], leader: int | None, rf: int, brokers: dict[int, str | None]) -> bool:
    if len(replicas) != rf or len(set(replicas)) != rf or any(b not in brokers for b in replicas):
        return False
    if leader is not None and replicas[0] != leader:
        return False
    racks_wanted = min(rf, _rack_count(brokers, brokers))
    return _rack_count(brokers, replicas) >= racks_wanted


def _followers(leader: int, order: list[int], rf: int, brokers: dict[int, str | None]) -> list[int]:
    """RF-1 followers after `leader` in the interleaved order, preferring racks not yet used. Taking
    neighbours in the ring gives every broker the same number of replicas when partitions = brokers."""
    start = order.index(leader)
    ring = [order[(start + i) % len(order)] for i in range(1, len(order))]
    chosen: list[int] = []
    racks = {real_rack(brokers[leader]) or ""}
    for candidate in ring:  # first pass: new racks only
        if len(chosen) == rf - 1:
            break
        if (real_rack(brokers[candidate]) or "") not in racks:
            chosen.append(candidate)
            racks.add(real_rack(brokers[candidate]) or "")
    for candidate in ring:
        if len(chosen) == rf - 1:
            break
        if candidate not in chosen:
            chosen.append(candidate)
    return chosen


def plan(spec: TopicSpec, state: TopicState, previous_owners: dict[int, int] | None = None) -> ReconcilePlan:
    """The changes that bring the topic to the rules; nothing when it already follows them.
    `previous_owners` (broker -> partition, from the last reconcile of a long-running probe) keeps ownership
    sticky when a broker heads several partitions, as it does after an orphan's replicas moved onto it."""
    if not state.brokers:
        raise ClusterError("no live broker in the cluster metadata; is the cluster up?")
    brokers = state.brokers
    order = rack_interleaved(brokers)
    rf = min(len(brokers), 3)
    wanted_configs = spec.configs(rf)
    if not state.exists:
        assignment = [_replica_set(broker, order, rf, brokers) for broker in sorted(brokers)]
        owners = {broker: partition for partition, broker in enumerate(sorted(brokers))}
        return ReconcilePlan(rf, assignment, [], {}, [], wanted_configs, owners, [])

    owners, new_owners, orphans = _ownership(state, rf, previous_owners or {})
    load = _replica_load(state)
    reassign = _reassignments(state, owners, order, rf, load)
    add: list[list[int]] = []
    next_partition = max(state.partitions, default=-1) + 1
    for broker in new_owners:  # a broker with no partition to take over gets a new one
        owners[broker] = next_partition
        next_partition += 1
        add.append(_replica_set(broker, order, rf, brokers))
    configs = {key: value for key, value in wanted_configs.items() if state.configs.get(key) != value}
    return ReconcilePlan(rf, None, add, reassign, _elections(state, owners, reassign), configs,
                         dict(sorted(owners.items())), orphans)


def _replica_set(leader: int, order: list[int], rf: int, brokers: dict[int, str | None]) -> list[int]:
    """The replicas of a partition `leader` leads: itself first (the preferred leader), then its followers."""
    return [leader, *_followers(leader, order, rf, brokers)]


def _ownership(state: TopicState, rf: int, previous: dict[int, int]) -> tuple[dict[int, int], list[int], list[int]]:
    """Which partition each live broker owns (leads by preference): (owners broker -> partition, the brokers
    that need a new partition, the orphans no live broker owns)."""
    brokers, parts = state.brokers, state.partitions
    headed: dict[int, list[int]] = {}
    for partition in sorted(parts):
        replicas = parts[partition].replicas
        if replicas and replicas[0] in brokers:
            headed.setdefault(replicas[0], []).append(partition)

    def claim(broker: int, partition: int) -> tuple[bool, bool, int]:
        # the partition it owned before; else one whose replica set is whole (an orphan moved onto this broker
        # has lost a replica); else the lowest id
        replicas = parts[partition].replicas
        whole = len(replicas) == rf and all(b in brokers for b in replicas)
        return previous.get(broker) != partition, not whole, partition

    owners = {broker: min(led, key=functools.partial(claim, broker)) for broker, led in sorted(headed.items())}
    free_brokers = [b for b in sorted(brokers) if b not in owners]
    unowned = [p for p in sorted(parts) if p not in owners.values()]
    for broker in free_brokers:
        if unowned:  # scale up again: a new broker takes over an orphan
            owners[broker] = unowned.pop(0)
    new_owners = [b for b in free_brokers if b not in owners]
    return owners, new_owners, unowned


def _replica_load(state: TopicState) -> dict[int, int]:
    """Live broker -> how many of the topic's replicas it holds."""
    load = {broker: 0 for broker in state.brokers}
    for partition in state.partitions.values():
        for broker in partition.replicas:
            if broker in load:
                load[broker] += 1
    return load


def _reassignments(state: TopicState, owners: dict[int, int], order: list[int], rf: int,
                   load: dict[int, int]) -> dict[int, list[int]]:
    """New replica sets for the partitions whose current one breaks the rules (acceptable ones are kept):
    an owned partition gets its owner's replica set, an orphan keeps its live replicas and is filled up
    with the least loaded brokers. `load` is kept up to date as replicas move."""
    brokers, parts = state.brokers, state.partitions
    reassign: dict[int, list[int]] = {}
    leader_of = {partition: broker for broker, partition in owners.items()}
    for partition in sorted(parts):
        if partition in state.reassigning:
            continue  # converge on the next pass, once the reassignment in flight is done
        current = parts[partition].replicas
        want_leader = leader_of.get(partition)
        if _acceptable(current, want_leader, rf, brokers):
            continue
        if want_leader is not None:
            target = _replica_set(want_leader, order, rf, brokers)
        else:  # orphan: keep its live replicas, fill up with the least loaded brokers
            target = [b for b in current if b in brokers][:rf]
            for broker in sorted(brokers, key=lambda b: (load[b], order.index(b))):
                if len(target) == rf:
                    break
                if broker not in target:
                    target.append(broker)
        for broker in current:
            if broker in load:
                load[broker] -= 1
        for broker in target:
            load[broker] += 1
        reassign[partition] = target
    return reassign


def _elections(state: TopicState, owners: dict[int, int], reassign: dict[int, list[int]]) -> list[int]:
    """The owned partitions led by another broker while the owner is in the ISR (a reassigned one waits for
    its reassignment)."""
    elect = []
    for broker, partition in owners.items():
        if partition in state.partitions and partition not in reassign and partition not in state.reassigning:
            current = state.partitions[partition]
            if current.leader != broker and broker in current.isr:
                elect.append(partition)
    return sorted(elect)


def _await_partitions(admin: TopicAdmin, topic: str, count: int, wait: float) -> None:
    """Brokers learn of new partitions a moment after the controller accepts them, and callers go on to
    use (and observe) them: wait until the metadata shows `count` partitions, each with a leader."""
    deadline = time.monotonic() + max(wait, 5.0)
    while time.monotonic() < deadline:
        seen = admin.observe(topic)
        if len(seen.partitions) >= count and all(p.leader >= 0 for p in seen.partitions.values()):
            return
        time.sleep(0.2)


def reconcile(admin: TopicAdmin, spec: TopicSpec, wait: float = 30.0,
              previous_owners: dict[int, int] | None = None) -> ReconcileResult:
    """Observes the topic, applies the plan, returns what changed. With `wait` > 0, waits (up to
    `wait` seconds) for reassignments to finish and then elects their preferred leaders, so one
    call converges; otherwise the next call finishes the job. `previous_owners`: see `plan()`."""
    state = admin.observe(spec.name)
    todo = plan(spec, state, previous_owners)
    result = ReconcileResult(topic=spec.name, changed=todo.changes_anything, created=False, partitions_added=[],
                             reassigned=todo.reassign, elected=[], configs_set={}, owners=todo.owners,
                             orphans=todo.orphans, replication_factor=todo.replication_factor)
    if todo.create is not None:
        result.created = admin.create_topic(spec.name, todo.create, todo.configs)
        _await_partitions(admin, spec.name, len(todo.create), wait)
        return result
    if todo.configs:
        admin.set_configs(spec.name, todo.configs)
        result.configs_set = todo.configs
    if todo.add_partitions:
        total = len(state.partitions) + len(todo.add_partitions)
        admin.add_partitions(spec.name, total, todo.add_partitions)
        result.partitions_added = list(range(len(state.partitions), total))
        _await_partitions(admin, spec.name, total, wait)
    if todo.reassign:
        admin.reassign(spec.name, todo.reassign)
    elect = list(todo.elect)
    if todo.reassign and wait > 0:
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline and admin.reassignments(spec.name) & set(todo.reassign):
            time.sleep(0.5)
        after = admin.observe(spec.name)
        for broker, p in todo.owners.items():
            part = after.partitions.get(p)
            if part and p in todo.reassign and part.leader != broker and broker in part.isr:
                elect.append(p)
    if elect:
        result.errors = admin.elect(spec.name, sorted(set(elect)))
        result.elected = sorted(set(elect))
    return result
