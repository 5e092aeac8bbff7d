"""The admin calls the product makes on a topic, each with a timeout and its failures named: observe a topic
(brokers, partitions, configs, reassignments in flight), create it, add partitions, reassign, elect preferred
leaders, set configs. A harmless repeat (the topic already exists, no election needed) is no error."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from confluent_kafka import ElectionType, KafkaException
from confluent_kafka import TopicPartition as CTopicPartition
from confluent_kafka.admin import (
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    ResourceType,
)
from kafka import TopicPartition
from kafka.admin import KafkaAdminClient
from kafka.errors import BrokerNotAvailableError, KafkaConnectionError, KafkaError, NodeNotReadyError

from canary.errors import ClusterError
from canary.kafka.clients import admin_client
from canary.kafka.health import metadata_and_brokers
from canary.kafka.settings import kafka_python_settings


@dataclass(frozen=True)
class PartitionState:
    replicas: tuple[int, ...]
    leader: int            # -1 when offline
    isr: tuple[int, ...]


# The rollout's cluster lock (canary.rollout.core.lock): while this topic exists a rollout restarts brokers.
ROLLOUT_LOCK_TOPIC = "__kafka_canary_rollout_lock"


def is_user_topic(topic: str) -> bool:
    """A topic of the cluster's clients: not Kafka's internal topics (`__consumer_offsets`, …) nor this tool's
    (`__kafka_canary…`), nor the `_…` topics of the tools around Kafka (`_schemas`, `_confluent…`)."""
    return not topic.startswith("_")

# kafka-python calls tried this many times when the connection breaks (a broker that has just restarted).
CONNECTION_TRIES = 5
T = TypeVar("T")


@dataclass(frozen=True)
class TopicState:
    """What the cluster looks like to the reconciler."""
    brokers: dict[int, str | None]            # live broker id -> rack
    exists: bool
    partitions: dict[int, PartitionState] = field(default_factory=dict)
    configs: dict[str, str] = field(default_factory=dict)
    reassigning: frozenset[int] = frozenset()  # partitions with a reassignment in flight
    rollout_running: bool = False              # the rollout lock is held: brokers away are restarting


class TopicAdmin:
    """The admin calls reconcile needs, each with a timeout and named failures. Mutating calls are
    the `create_topic`, `add_partitions`, `reassign`, `elect`, `set_configs` methods (tests count them)."""

    def __init__(self, bootstrap_servers: str, client: dict[str, str] | None = None, timeout: float = 30.0,
                 away_grace: float = 0.0):
        self.bootstrap_servers = bootstrap_servers
        self.client = dict(client or {})
        self.timeout = timeout
        # A broker missing from the metadata for less than this many seconds is restarting or down, not gone: the
        # reconciler keeps it (no replica moved off it, its partition still produced to, so the probe sees the
        # outage instead of looking away), and a rolling restart never triggers reassignments. While a rollout holds
        # the cluster lock, every broker seen is kept, however long it is away.
        self.away_grace = away_grace
        self._seen: dict[int, tuple[float, str | None]] = {}
        self.admin = admin_client(bootstrap_servers, {"socket.timeout.ms": 10000, **self.client})

    def observe(self, topic: str) -> TopicState:
        try:
            # All topics: a metadata request naming the topic could auto-create it on the broker.
            metadata, nodes = metadata_and_brokers(self.admin, self.timeout)
            rollout_running = ROLLOUT_LOCK_TOPIC in metadata.topics
            brokers = self._with_recently_seen({node.id: node.rack for node in nodes}, rollout_running)
        except KafkaException as exc:
            raise ClusterError(f"cannot read cluster metadata from {self.bootstrap_servers}: {exc.args[0]}") from exc
        meta = metadata.topics.get(topic)
        if meta is None or (meta.error is not None and meta.error.name() == "UNKNOWN_TOPIC_OR_PART"):
            return TopicState(brokers=brokers, exists=False, rollout_running=rollout_running)
        if meta.error is not None:
            raise ClusterError(f"topic {topic}: {meta.error.str()}")
        parts = {p.id: PartitionState(tuple(p.replicas), p.leader, tuple(p.isrs)) for p in meta.partitions.values()}
        return TopicState(brokers=brokers, exists=True, partitions=parts, configs=self._configs(topic),
                          reassigning=frozenset(self.reassignments(topic)), rollout_running=rollout_running)

    def _with_recently_seen(self, live: dict[int, str | None], rollout_running: bool = False) -> dict[int, str | None]:
        now = time.monotonic()
        self._seen.update({b: (now, rack) for b, rack in live.items()})
        grace = float("inf") if rollout_running else self.away_grace
        away = {b: rack for b, (seen, rack) in self._seen.items() if b not in live and now - seen < grace}
        return live | away

    def _configs(self, topic: str, tries: int = 10) -> dict[str, str]:
        resource = ConfigResource(ResourceType.TOPIC, topic)
        for attempt in range(tries):
            for res, future in self.admin.describe_configs([resource], request_timeout=self.timeout).items():
                try:
                    entries = future.result(timeout=self.timeout)
                except KafkaException as exc:
                    # A topic just created reaches every broker's metadata a moment later.
                    if exc.args[0].name() == "UNKNOWN_TOPIC_OR_PART" and attempt < tries - 1:
                        time.sleep(0.5)
                        continue
                    raise ClusterError(f"describing configs of {res.name} failed: {exc.args[0].str()}") from exc
                # Effective values, defaults included: a default that already equals the rule is no change.
                return {name: entry.value for name, entry in entries.items()}
        return {}

    def _kafka_python(self):
        return KafkaAdminClient(bootstrap_servers=self.bootstrap_servers, client_id="kafka-canary-probe",
                                request_timeout_ms=int(self.timeout * 1000), **kafka_python_settings(self.client))

    def _with_kafka_python(self, call: Callable[[KafkaAdminClient], T]) -> T:
        """`call` on a kafka-python admin client, asked again on a fresh one when the connection broke: a broker
        restarted a moment ago (a rollout's) can drop the first connection made to it."""
        for attempt in range(CONNECTION_TRIES):
            try:
                admin = self._kafka_python()
                try:
                    return call(admin)
                finally:
                    admin.close()
            except (KafkaConnectionError, NodeNotReadyError, BrokerNotAvailableError):
                if attempt == CONNECTION_TRIES - 1:
                    raise
                time.sleep(1.0)
        raise AssertionError("unreachable")

    def reassignments(self, topic: str) -> set[int]:
        """The partitions of `topic` with a reassignment in flight."""
        return {partition for name, partition in self.all_reassignments() if name == topic}

    def all_reassignments(self) -> list[tuple[str, int]]:
        """Every (topic, partition) with a reassignment in flight, sorted."""
        try:
            ongoing = self._with_kafka_python(
                lambda admin: admin.list_partition_reassignments(timeout_ms=int(self.timeout * 1000)))
        except KafkaError as exc:
            raise ClusterError(f"listing partition reassignments failed: {exc}") from exc
        return sorted((tp.topic, tp.partition) for tp in ongoing)

    # mutating calls

    def create_topic(self, topic: str, assignment: list[list[int]], configs: dict[str, str]) -> bool:
        """False when the topic already existed (a harmless repeat)."""
        new = NewTopic(topic, num_partitions=len(assignment), replica_assignment=assignment, config=configs)
        for name, future in self.admin.create_topics([new], operation_timeout=self.timeout,
                                                     request_timeout=self.timeout).items():
            try:
                future.result(timeout=self.timeout)
            except KafkaException as exc:
                if exc.args[0].name() == "TOPIC_ALREADY_EXISTS":
                    return False
                raise ClusterError(f"creating topic {name} failed: {exc.args[0].str()}") from exc
        return True

    def add_partitions(self, topic: str, total: int, new_assignment: list[list[int]]) -> None:
        request = NewPartitions(topic, total, replica_assignment=new_assignment)
        for name, future in self.admin.create_partitions([request], operation_timeout=self.timeout,
                                                         request_timeout=self.timeout).items():
            try:
                future.result(timeout=self.timeout)
            except KafkaException as exc:
                raise ClusterError(f"adding partitions to {name} failed: {exc.args[0].str()}") from exc

    def reassign(self, topic: str, targets: dict[int, list[int]]) -> None:
        wanted = {TopicPartition(topic, p): replicas for p, replicas in targets.items()}
        try:  # the same target again is harmless: asked again, a reassignment already made changes nothing
            errors = self._with_kafka_python(
                lambda admin: admin.alter_partition_reassignments(wanted, timeout_ms=int(self.timeout * 1000)))
        except KafkaError as exc:
            raise ClusterError(f"reassigning partitions of {topic} failed: {exc}") from exc
        failed = {tp.partition: err.__name__ for tp, err in errors.items() if err is not None}
        if failed:
            raise ClusterError(f"reassigning partitions of {topic} failed: {failed}")

    def elect(self, topic: str, partitions: list[int]) -> list[str]:
        """Preferred leader elections; returns the per-partition failures (named), an
        ELECTION_NOT_NEEDED being no failure."""
        # No timeout kwargs: confluent-kafka 2.16's elect_leaders binding fails on any keyword argument;
        # result(timeout=...) below bounds the wait instead.
        future = self.admin.elect_leaders(ElectionType.PREFERRED, [CTopicPartition(topic, p) for p in partitions])
        try:
            results = future.result(timeout=self.timeout)
        except KafkaException as exc:
            raise ClusterError(f"preferred leader election on {topic} failed: {exc.args[0].str()}") from exc
        return [f"{tp.topic}-{tp.partition}: {err.str()}" for tp, err in results.items()
                if err is not None and err.name() != "ELECTION_NOT_NEEDED"]

    def set_configs(self, topic: str, configs: dict[str, str]) -> None:
        resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
            ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in sorted(configs.items())])
        for res, future in self.admin.incremental_alter_configs([resource], request_timeout=self.timeout).items():
            try:
                future.result(timeout=self.timeout)
            except KafkaException as exc:
                raise ClusterError(f"setting configs of {res.name} failed: {exc.args[0].str()}") from exc


def broker_facts(bootstrap_servers: str, client_config: Mapping[str, object] | None = None,
                 timeout: float = 10.0) -> dict[int, tuple[str | None, dict[str, str]]]:
    """What the cluster itself says of each registered broker: its rack, and the config it was started with
    (DescribeConfigs entries from its server.properties, sensitive ones left out: the cluster hides their values)."""
    admin = admin_client(bootstrap_servers, client_config)
    registered = admin.describe_cluster(request_timeout=timeout).result(timeout=timeout).nodes
    facts: dict[int, tuple[str | None, dict[str, str]]] = {}
    for node in registered:  # one request per broker: a broker's configs come from that broker
        resource = ConfigResource(ResourceType.BROKER, str(node.id))
        try:
            entries = admin.describe_configs([resource], request_timeout=timeout)[resource].result(timeout=timeout)
        except KafkaException:
            continue  # registered but not answering: the caller knows it from elsewhere
        facts[node.id] = (node.rack, {k: e.value for k, e in entries.items() if e.value is not None
                                      and not e.is_sensitive and e.source == ConfigSource.STATIC_BROKER_CONFIG.value})
    return facts
