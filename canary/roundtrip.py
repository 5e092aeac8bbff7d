"""A produce/consume round trip through every partition of a topic, so through every leader.

The smallest proof that a cluster serves clients: one acks=all message per partition, read
back by a consumer assigned to that partition. The probe (a later, fuller tool) does this
continuously; this is the one-shot version the demo and the cluster tests use.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import asdict, dataclass, field

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ClusterMetadata, PartitionMetadata

from canary.errors import ClusterError
from canary.kafka.admin import TopicAdmin
from canary.kafka.clients import QUIET_LOGGER, admin_client, position
from canary.kafka.wait import WaitTimeout, wait_until


@dataclass(frozen=True)
class PartitionRoundTrip:
    partition: int
    leader: int
    replicas: list[int]
    isr: list[int]
    acked: bool
    received: bool
    ack_ms: float | None  # produce acknowledgement latency
    e2e_ms: float | None  # send to receive
    error: str | None

    @property
    def ok(self) -> bool:
        return self.acked and self.received and self.error is None


def ensure_topic(bootstrap_servers: str, topic: str, broker_ids: list[int], min_insync: int | None = None,
                 timeout: float = 30.0, client: dict[str, str] | None = None) -> None:
    """Creates `topic` with one partition per broker, each broker the preferred leader of one, and
    RF = min(brokers, 3). An existing topic is left as it is (a harmless repeat). `client`: librdkafka settings
    (security)."""
    brokers = sorted(broker_ids)
    rf = min(3, len(brokers))
    assignment = [[brokers[(p + r) % len(brokers)] for r in range(rf)] for p in range(len(brokers))]
    config = {"min.insync.replicas": str(min_insync if min_insync is not None else max(1, rf - 1))}
    TopicAdmin(bootstrap_servers, client, timeout=timeout).create_topic(topic, assignment, config)


def round_trip(bootstrap_servers: str, topic: str, timeout: float = 30.0, client: dict[str, str] | None = None
               ) -> list[PartitionRoundTrip]:
    """Sends one acks=all message to each partition of `topic` and reads each back. `client`: librdkafka settings
    (security)."""
    client = dict(client or {})
    admin = admin_client(bootstrap_servers, client)
    metadata = _topic_metadata(admin, bootstrap_servers, topic, timeout)
    partitions = sorted(metadata.topics[topic].partitions.values(), key=lambda p: p.id)
    run_id = uuid.uuid4().hex
    producer = Producer({"bootstrap.servers": bootstrap_servers, "acks": "all", "enable.idempotence": True,
                         "message.timeout.ms": int(timeout * 1000), "linger.ms": 0, "logger": QUIET_LOGGER, **client})
    sent = _send_each(producer, topic, partitions, run_id, timeout)
    received = _read_back(bootstrap_servers, topic, sent, run_id, timeout, client)
    return [_result(part, sent, received) for part in partitions]


def _topic_metadata(admin: AdminClient, bootstrap_servers: str, topic: str, timeout: float) -> ClusterMetadata:
    """The cluster's metadata once `topic` is in it; ClusterError when it is not within `timeout`."""
    found: list[ClusterMetadata] = []

    def missing() -> str | None:
        # All topics: a metadata request naming the topic would auto-create it on brokers that allow that.
        metadata = admin.list_topics(timeout=timeout)
        found[:] = [metadata]
        ok = topic in metadata.topics and metadata.topics[topic].error is None
        return None if ok else f"topic {topic} not in the metadata"

    try:  # a topic just created reaches every broker's metadata cache a moment later
        wait_until(f"topic {topic}", timeout, missing, poll=0.5)
    except WaitTimeout:
        raise ClusterError(f"topic {topic} is not available on {bootstrap_servers}") from None
    return found[0]


@dataclass
class _Sent:
    """Per partition: when its message was sent and acknowledged (monotonic seconds), the offset it was written at,
    or the error it failed with."""

    sent: dict[int, float] = field(default_factory=dict)
    acked: dict[int, float] = field(default_factory=dict)
    offsets: dict[int, int] = field(default_factory=dict)
    errors: dict[int, str] = field(default_factory=dict)

    def on_delivery(self, err, msg) -> None:
        if err is not None:
            self.errors[msg.partition()] = err.str()
        else:
            self.acked[msg.partition()] = time.monotonic()
            self.offsets[msg.partition()] = msg.offset()


def _send_each(producer: Producer, topic: str, partitions: list[PartitionMetadata], run_id: str, timeout: float
               ) -> _Sent:
    """One message of this round trip (`run_id`) to each partition, acknowledged or failed within `timeout`."""
    sent = _Sent()
    for part in partitions:
        sent.sent[part.id] = time.monotonic()
        value = json.dumps({"runId": run_id, "partition": part.id, "timestamp": int(time.time() * 1000)})
        producer.produce(topic, value=value.encode(), partition=part.id, on_delivery=sent.on_delivery)
    producer.flush(timeout)
    return sent


def _read_back(bootstrap_servers: str, topic: str, sent: _Sent, run_id: str, timeout: float,
               client: dict[str, str]) -> dict[int, float]:
    """When (monotonic seconds) each acknowledged message of this round trip was read back, within `timeout`."""
    consumer = Consumer({"bootstrap.servers": bootstrap_servers, "group.id": f"kafka-canary-rt-{run_id}",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest", "logger": QUIET_LOGGER,
                         **client})
    received: dict[int, float] = {}
    try:
        # Read each partition from the offset its message was acknowledged at.
        consumer.assign([TopicPartition(topic, p, offset) for p, offset in sent.offsets.items()])
        deadline = time.monotonic() + timeout
        while len(received) < len(sent.acked) and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            try:
                body = json.loads(msg.value() or b"")
            except ValueError:
                continue  # another client's record in the topic
            if isinstance(body, dict) and body.get("runId") == run_id:
                received.setdefault(position(msg)[1], time.monotonic())
    finally:
        consumer.close()
    return received


def _result(part: PartitionMetadata, sent: _Sent, received: dict[int, float]) -> PartitionRoundTrip:
    pid = part.id
    acked = sent.acked
    return PartitionRoundTrip(
        partition=pid, leader=part.leader, replicas=list(part.replicas), isr=list(part.isrs),
        acked=pid in acked, received=pid in received,
        ack_ms=round((acked[pid] - sent.sent[pid]) * 1000, 2) if pid in acked else None,
        e2e_ms=round((received[pid] - sent.sent[pid]) * 1000, 2) if pid in received else None,
        error=sent.errors.get(pid) or (None if pid in received or pid not in acked else "not received in time"),
    )


def to_json(results: list[PartitionRoundTrip]) -> list[dict]:
    return [asdict(r) | {"ok": r.ok} for r in results]
