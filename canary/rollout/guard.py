"""The safe-roll guard (Strimzi's rule): a broker may restart only if no partition it hosts is already below
`min.insync.replicas`, and none would drop below it when the broker leaves the ISR.

A partition whose min ISR is not below its replication factor can never stay writable with acks=all while
any replica restarts, so it does not block (the guard would wait forever); it is named in the warnings.

Min ISR is read as the cluster enforces it: DescribeConfigs on each topic answers the topic's override, else the
cluster-wide dynamic default, else the answering broker's static default. With eligible leader replicas on (KIP-966;
the default of new 4.1 clusters) broker-level overrides are refused and a cluster-level value always exists, so that
answer is exactly what the controller enforces. Without ELR a per-broker override that differs from the answering
broker's would not be seen (a configuration Kafka itself now forbids). The guard counts the ISR, not the ELR: a
replica the ELR keeps is a safe leader after a failure, but under "strict min ISR" a partition whose ISR is below
min.insync.replicas still refuses acks=all writes (its high watermark cannot advance), which is the outage the guard
prevents.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field

from confluent_kafka import KafkaException
from confluent_kafka.admin import ConfigResource, ResourceType

from canary.errors import ClusterError
from canary.kafka.clients import admin_client


@dataclass(frozen=True)
class PartitionView:
    topic: str
    partition: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    min_isr: int

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"


def who(brokers: Collection[int]) -> str:
    """One broker or a batch, as messages name it: `broker 3`, `brokers [3, 4]`."""
    ids = sorted(brokers)
    return f"broker {ids[0]}" if len(ids) == 1 else f"brokers {ids}"


@dataclass
class GuardDecision:
    brokers: tuple[int, ...]                               # one broker, or a batch restarting together
    allowed: bool
    reasons: list[str] = field(default_factory=list)   # why not, one per partition (abbreviated by caller)
    warnings: list[str] = field(default_factory=list)

    @property
    def who(self) -> str:
        return who(self.brokers) + (" together" if len(self.brokers) > 1 else "")

    def reason(self, limit: int = 5) -> str:
        shown = "; ".join(self.reasons[:limit])
        more = f"; and {len(self.reasons) - limit} more" if len(self.reasons) > limit else ""
        return f"{self.who} may not restart: {shown}{more}" if self.reasons else "allowed"

    def to_dict(self) -> dict:
        return {"brokers": list(self.brokers), "allowed": self.allowed, "reasons": self.reasons,
                "warnings": self.warnings}


def decide(brokers: int | Collection[int], partitions: list[PartitionView], down: Collection[int] = frozenset(),
           headroom: int = 0) -> GuardDecision:
    """Pure: may `brokers` (one, or a batch) restart now, together, given every partition's replicas, ISR and min
    ISR. `down`: brokers known to be stopped (the deployer says so); they stay in the ISR the cluster reports until
    the controller fences them (broker.session.timeout.ms after a crash), so they are taken out of it here. A batch
    of two or more must leave every partition it takes ISR members from at min.insync.replicas + `headroom` (Cloudera
    Manager's "all partitions stay healthy" is 1); one broker alone needs min.insync.replicas only, so that a serial
    roll is always possible where the cluster allows it at all."""
    batch = (brokers,) if isinstance(brokers, int) else tuple(sorted(set(brokers)))
    need_above = headroom if len(batch) > 1 else 0
    decision = GuardDecision(batch, allowed=True)
    for p in partitions:
        if not any(b in p.replicas for b in batch):
            continue
        if p.min_isr >= len(p.replicas):
            decision.warnings.append(f"{p.name}: min.insync.replicas {p.min_isr} ≥ replication factor "
                                     f"{len(p.replicas)}, unavailable for acks=all during any restart")
            continue
        isr = [b for b in p.isr if b not in down]
        gone = sorted(set(p.isr) - set(isr))
        shown = f"ISR {isr}" + (f" without broker(s) {gone}, which are down" if gone else "")
        after = [b for b in isr if b not in batch]
        if len(isr) < p.min_isr:
            decision.reasons.append(f"{p.name} is already below min.insync.replicas ({shown}, min {p.min_isr})")
        elif len(after) < len(isr) and len(after) < p.min_isr + need_above:
            floor = f"min {p.min_isr}" + (f" + headroom {need_above}" if need_above else "")
            decision.reasons.append(f"{p.name} would drop below min.insync.replicas{' + headroom' * bool(need_above)} "
                                    f"({shown}, {floor})")
    decision.allowed = not decision.reasons
    return decision


def observe(bootstrap_servers: str, client: dict[str, str] | None = None, timeout: float = 15.0
            ) -> list[PartitionView]:
    """Every partition of every topic with its topic's effective min.insync.replicas."""
    admin = admin_client(bootstrap_servers, client)
    try:
        metadata = admin.list_topics(timeout=timeout)
    except KafkaException as exc:
        raise ClusterError(f"cannot read cluster metadata from {bootstrap_servers}: {exc.args[0]}") from exc
    topics = sorted(t for t, meta in metadata.topics.items() if meta.error is None)
    min_isr: dict[str, int] = {}
    todo = list(topics)
    for attempt in range(10):
        unknown = []
        if todo:
            resources = [ConfigResource(ResourceType.TOPIC, t) for t in todo]
            for res, future in admin.describe_configs(resources, request_timeout=timeout).items():
                try:
                    entries = future.result(timeout=timeout)
                except KafkaException as exc:
                    if exc.args[0].name() == "UNKNOWN_TOPIC_OR_PART" and attempt < 9:
                        unknown.append(res.name)  # created or deleted a moment ago: look again
                        continue
                    raise ClusterError(f"describing configs of topic {res.name} failed: {exc.args[0].str()}") from exc
                entry = entries.get("min.insync.replicas")
                min_isr[res.name] = int(entry.value) if entry is not None and entry.value else 1
        if not unknown:
            break
        time.sleep(0.5)
        present = admin.list_topics(timeout=timeout).topics
        todo = [t for t in unknown if t in present]
        topics = [t for t in topics if t in min_isr or t in todo]
    return [PartitionView(t, p.id, tuple(p.replicas), tuple(p.isrs), p.leader, min_isr[t])
            for t in topics if t in min_isr for p in sorted(metadata.topics[t].partitions.values(), key=lambda p: p.id)]


def isr_headroom(partitions: list[PartitionView]) -> int | None:
    """The fewest in-sync replicas above min.insync.replicas over `partitions` (negative: one is below it), leaving
    out those whose min ISR is not below their replication factor (no restart keeps them writable); None for none."""
    return min((len(p.isr) - p.min_isr for p in partitions if p.min_isr < len(p.replicas)), default=None)


def not_in_isr(broker_id: int, partitions: list[PartitionView]) -> list[str]:
    """Partitions hosted by `broker_id` whose ISR it is not (yet) in: the learner warm-up waits for none."""
    return [p.name for p in partitions if broker_id in p.replicas and broker_id not in p.isr]


def registered(bootstrap_servers: str, client: dict[str, str] | None = None) -> dict[int, str | None]:
    """The registered, unfenced brokers and their racks."""
    admin = admin_client(bootstrap_servers, client)
    return {n.id: n.rack for n in admin.describe_cluster(request_timeout=10).result(timeout=10).nodes}


def learners_missing(registered_ids: Collection[int], partitions: Callable[[], list[PartitionView]],
                     broker_ids: list[int]) -> str | None:
    """The learner warm-up of `broker_ids`, from one look at the cluster (its registered brokers, and its partitions
    read only when needed): None when each is registered and in the ISR of every partition it hosts, else what is
    still missing."""
    seen: list[PartitionView] | None = None
    for broker in broker_ids:
        if broker not in registered_ids:
            return f"broker {broker} not registered yet"
        seen = seen if seen is not None else partitions()
        behind = not_in_isr(broker, seen)
        if behind:
            return f"broker {broker} not yet in the ISR of {len(behind)} partition(s): {behind[:5]}"
    return None


def learner_missing(bootstrap_servers: str, client: dict[str, str] | None, broker_ids: list[int]) -> str | None:
    """learners_missing on the cluster at `bootstrap_servers` (the rollout step and the Airflow trigger both wait on
    this)."""
    return learners_missing(registered(bootstrap_servers, client), lambda: observe(bootstrap_servers, client or {}),
                            broker_ids)


def quorum_refuses(voters: Collection[int], lagging: Collection[int], node: int) -> str | None:
    """Why controller `node` may not restart now, or None. The KRaft quorum (Raft) stays available only while a
    majority of its voters is up and caught up with the leader (KIP-853's quorum description: each voter's log end
    offset against the high watermark): `node` may leave only if the other voters still caught up are a majority of
    all voters. A single voter cannot keep the quorum through its own restart; it is allowed, and the metadata log
    pauses for the restart (a one-controller cluster has no other way to roll)."""
    voters = set(voters)
    if len(voters) <= 1:
        return None
    caught_up = voters - set(lagging) - {node}
    needed = len(voters) // 2 + 1
    if len(caught_up) >= needed:
        return None
    behind = sorted((voters - {node}) & set(lagging))
    return (f"restarting controller {node} would leave {len(caught_up)} of {len(voters)} voters caught up, fewer than "
            f"the {needed} the quorum needs; voters {behind} are not caught up with the quorum")
