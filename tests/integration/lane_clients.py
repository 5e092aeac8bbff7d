"""Helpers of the lane-aware client tests (test_clients*.py): a topic whose preferred leaders put broker 3's
partitions in its lane, producers that count what was acknowledged, and consumers that run in a thread."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field

from confluent_kafka import Consumer, TopicPartition
from waiting import wait_until

from canary.clients import LaneConsumer, LaneProducer, LaneView
from canary.kafka.admin import TopicAdmin
from canary.kafka.clients import QUIET_LOGGER

PARTITIONS = 6
# Broker p % 3 + 1 is the preferred leader of partition p: broker 3 leads 2 and 5 when it is the canary broker.
ASSIGNMENT = [[p % 3 + 1, (p + 1) % 3 + 1, (p + 2) % 3 + 1] for p in range(PARTITIONS)]
CANARY_PARTITIONS = (2, 5)
BASELINE_PARTITIONS = (0, 1, 3, 4)


def create_topic(bootstrap: str, topic: str) -> None:
    assert TopicAdmin(bootstrap).create_topic(topic, ASSIGNMENT, {"min.insync.replicas": "2"})


def wait_for_lanes(bootstrap: str, topic: str, canary: tuple[int, ...], timeout: float = 180) -> None:
    """Until the metadata shows exactly `canary` as the canary partitions; preferred elections meanwhile."""
    admin = TopicAdmin(bootstrap)
    with LaneView({"bootstrap.servers": bootstrap}, [topic], interval=60) as view:
        def settled() -> bool:
            view.refresh([topic])
            lanes = view.get(topic)
            if lanes.partitions("canary") == canary and len(lanes.led) == PARTITIONS:
                return True
            admin.elect(topic, list(range(PARTITIONS)))
            return False
        wait_until(settled, timeout=timeout, what=f"canary partitions {canary} of {topic}")


def record(producer: str, i: int) -> bytes:
    return json.dumps({"producer": producer, "i": i}).encode()


@dataclass
class Sent:
    """What one producer had acknowledged: (producer, i) -> partition, with the acknowledgement time."""
    name: str
    acked: dict[tuple[str, int], int] = field(default_factory=dict)
    acked_at: dict[tuple[str, int], float] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    keys: dict[str, set[int]] = field(default_factory=lambda: defaultdict(set))
    # The producer's delivery callbacks run on its polling thread while a test reads: one lock for both.
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def callback(self, i: int, key: str | None):
        def delivered(err, msg) -> None:
            if err is not None:
                self.errors.append(err.str())
                return
            with self.lock:
                self.acked[(self.name, i)] = msg.partition()
                self.acked_at[(self.name, i)] = time.time()
                if key is not None:
                    self.keys[key].add(msg.partition())
        return delivered

    def partitions(self, since: float = 0.0, until: float = float("inf")) -> set[int]:
        with self.lock:
            return {p for k, p in self.acked.items() if since <= self.acked_at[k] < until}


def produce(producer: LaneProducer, sent: Sent, topic: str, start: int, count: int, keyed_every: int = 2) -> None:
    """`count` records, every `keyed_every`-th with one of 50 keys."""
    for i in range(start, start + count):
        key = f"key-{i % 50}" if i % keyed_every == 0 else None
        while True:
            try:
                producer.produce(topic, record(sent.name, i), key=key, on_delivery=sent.callback(i, key))
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)


class Steady(threading.Thread):
    """A producer sending `rate` records a second until stopped."""

    def __init__(self, producer: LaneProducer, sent: Sent, topic: str, rate: float):
        super().__init__(daemon=True)
        self.producer, self.sent, self.topic, self.rate = producer, sent, topic, rate
        self.stop = threading.Event()
        self.count = 0

    def run(self) -> None:
        start = time.monotonic()
        while not self.stop.is_set():
            produce(self.producer, self.sent, self.topic, self.count, 1, keyed_every=2)
            self.count += 1
            self.producer.poll(max(0.0, start + self.count / self.rate - time.monotonic()))


class Reading(threading.Thread):
    """A lane consumer processing in a thread; `received` counts every (producer, i) it processed."""

    def __init__(self, consumer: LaneConsumer):
        super().__init__(daemon=True)
        self.consumer = consumer
        self.received: Counter = Counter()
        self.stop = threading.Event()
        self.error: BaseException | None = None

    def _handle(self, msg) -> None:
        value = json.loads(msg.value())
        self.received[(value["producer"], value["i"])] += 1

    def run(self) -> None:
        try:
            self.consumer.process(self._handle, stop=self.stop, poll_timeout=0.2)
        except BaseException as exc:  # shown by finish()
            self.error = exc

    def finish(self) -> Counter:
        self.stop.set()
        self.join(timeout=30)
        self.consumer.close()
        assert self.error is None, f"consumer thread failed: {self.error!r}"
        return self.received

    def of(self, producer: str) -> set[tuple[str, int]]:
        return {k for k in list(self.received) if k[0] == producer}


def read_all(bootstrap: str, topic: str, timeout: float = 60) -> Counter:
    """Every record of the topic up to its current end, read by a plain consumer from the beginning (the ground
    truth; a producer's retry during a leadership change may have written a record twice)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "verify", "enable.auto.commit": False,
                         "logger": QUIET_LOGGER})
    ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(PARTITIONS)}
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    positions = dict.fromkeys(ends, 0)
    seen: Counter = Counter()
    deadline = time.monotonic() + timeout
    try:
        while any(positions[p] < ends[p] for p in ends) and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                positions[msg.partition()] = msg.offset() + 1
                value = json.loads(msg.value())
                seen[(value["producer"], value["i"])] += 1
    finally:
        consumer.close()
    assert all(positions[p] >= ends[p] for p in ends), f"read {positions} of {ends} in {timeout} s"
    return seen
