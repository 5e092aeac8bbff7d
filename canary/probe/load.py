"""Representative load for the window: a light probe never loads a broker, so a change that cuts capacity shows
only when the brokers work. The load pushes records of a real size with real batching and acks=all through a topic
laid out like the probe's (each broker the preferred leader of one partition), the same rate into every partition,
so canary and baseline brokers carry the same load and their own metrics compare fairly; a consumer fetches it all
back as it arrives, and at every reading a second consumer that is behind reads each partition's latest records back
as fast as it can (a broker's fetch path shows under a consumer catching up, not one at the head of the log). It
stops at once when its own produce errors pass a share (the cluster is struggling: the window's guards then decide)
and whenever the window stops it."""

from __future__ import annotations

import functools
import random
import string
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from confluent_kafka import OFFSET_END, Consumer, KafkaException, Producer, TopicPartition

from canary.broker_metrics import LOAD_METRICS
from canary.errors import CanaryError
from canary.kafka.admin import TopicAdmin
from canary.kafka.clients import QUIET_LOGGER
from canary.kafka.health import metadata_and_brokers
from canary.kafka.wait import wait_until
from canary.lanes import broker_lane
from canary.observations import BrokerReading, Lane
from canary.probe.catch_up import MIN_RECORDS, Backlog, behind_consumer, read_each_leader
from canary.probe.topic import TopicSpec, reconcile

LOAD_TOPIC = "__kafka_canary_load"
# Short retention: the load's data is worthless a minute later. No segment size of its own: the load must meet the
# brokers' own log settings as user topics do (a canary with log.segment.bytes cut to 1 MiB rolls a segment several
# times a second under load, which a topic override would hide); its segments close every minute instead, so
# retention can drop them. Not more often: every roll is a log flush, and the brokers' flushes are judged.
LOAD_TOPIC_SPEC = TopicSpec(LOAD_TOPIC, segment_bytes=None, segment_ms=60_000, retention_bytes=64 * 1024 * 1024,
                            retention_ms=10 * 60 * 1000)
# Latencies kept per lane for the summary's quantiles (enough for a p99 of a few minutes' load).
MAX_LATENCIES = 200_000
# A partition's latency quantiles in one interval are reported from this many acknowledged records on.
MIN_REPORTED = 50
# Distinct record values the load cycles through: random capital letters as Kafka's ProducerPerformance sends, so
# compression and the brokers' own work see data like real records (a value repeated record after record compresses
# to nothing: a broker recompressing with gzip did no work on it), more of them than a compression window holds.
PAYLOADS = 64


def payloads(record_size: int, count: int = PAYLOADS) -> list[bytes]:
    draw = random.Random(record_size)
    return [bytes(draw.choices(string.ascii_uppercase.encode(), k=record_size)) for _ in range(count)]


@dataclass(frozen=True)
class LoadConfig:
    bootstrap_servers: str
    rate: float                  # records per second into each partition
    record_size: int = 1000      # bytes per record
    client: dict[str, str] = field(default_factory=dict)
    max_error_share: float = 0.05  # the load stops when more of its records fail (after 1,000 sent)
    interval: float = 5.0          # seconds between the per-broker latency readings (when `emit` is given)
    run_id: str = "load"
    # Read back from behind per partition at each reading: enough to span several fetch responses
    # (canary.probe.catch_up.behind_consumer), little beside what the load writes in an interval.
    catch_up_bytes: int = 1024 * 1024

    def __post_init__(self) -> None:
        if self.rate <= 0 or not 1 <= self.record_size <= 1_000_000:
            raise CanaryError("load: rate must be > 0 records/s per partition and record_size 1..1000000 bytes")


@dataclass
class _Lane:
    sent: int = 0
    acked: int = 0
    failed: int = 0
    consumed: int = 0
    consumed_bytes: int = 0
    caught_up_bytes: int = 0        # read back by the catch-up consumer
    caught_up_s: float = 0.0        # ... in this many seconds (per partition, summed)
    latencies_ms: list[float] = field(default_factory=list)


class Load:
    """`emit`: where the load's per-broker readings go (LOAD_METRICS: its produce and consume latency through the
    partition each broker leads, every `config.interval`), beside the probe's observations; None keeps them to the
    summary."""

    def __init__(self, config: LoadConfig, emit: Callable[[BrokerReading], None] | None = None):
        self.config = config
        self.emit = emit
        # source (produce, consume) -> partition -> this interval's latencies (ms)
        self._interval_latencies: dict[str, dict[int, list[float]]] = {"produce": {}, "consume": {}}
        self.partition_leader: dict[int, int] = {}
        self.admin = TopicAdmin(config.bootstrap_servers, config.client)
        self.lanes: dict[str, _Lane] = {"canary": _Lane(), "baseline": _Lane()}
        self.partition_lane: dict[int, str] = {}
        self.stopped_because: str | None = None
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._started = 0.0
        self._producer: Producer | None = None
        self._consumer: Consumer | None = None
        self._behind: Consumer | None = None   # the catch-up consumer
        self._rate = config.rate

    def start(self) -> None:
        """Reconciles the load topic (one partition led by each broker), then produces and consumes."""
        c = self.config
        reconcile(self.admin, LOAD_TOPIC_SPEC, wait=10.0)
        self.partition_leader, lanes = self._leaders()
        self.partition_lane = {p: lanes.get(leader, "baseline") for p, leader in self.partition_leader.items()}
        self._interval_latencies = self._fresh_intervals()
        base = {"bootstrap.servers": c.bootstrap_servers, "logger": QUIET_LOGGER, **c.client}
        self._producer = Producer({**base, "acks": "all", "linger.ms": 5, "batch.size": 256 * 1024,
                                   "enable.idempotence": False, "compression.type": "none",
                                   "queue.buffering.max.messages": 1_000_000, "message.timeout.ms": 30_000,
                                   "client.id": "kafka-canary-load"})
        self._consumer = Consumer({**base, "group.id": f"kafka-canary-load-{int(time.time() * 1000)}",
                                   "enable.auto.commit": False, "client.id": "kafka-canary-load",
                                   "fetch.max.bytes": 50 * 1024 * 1024})
        self._consumer.assign([TopicPartition(LOAD_TOPIC, p, OFFSET_END) for p in self.partition_lane])
        loops = [self._produce_loop, self._consume_loop]
        if self.emit:
            self._behind = behind_consumer(base, c.catch_up_bytes, "kafka-canary-load-behind")
            loops += [self._report_loop, self._catch_up_loop]
        self._started = time.monotonic()
        for target in loops:
            thread = threading.Thread(target=target, name=f"load-{target.__name__}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def _leaders(self, timeout: float = 30.0) -> tuple[dict[int, int], dict[int, str]]:
        """Each load partition's leader, and each broker's lane. A topic just created reaches a broker's metadata a
        moment after the controller accepts it, and the broker answering may be another than the one the reconcile
        asked (a load that started on such an answer once failed with the topic missing), so the metadata is read
        until it shows the topic with a leader for every partition: a partition left out would leave its lane
        without load. Raises WaitTimeout naming what is missing."""
        found: list[tuple[dict[int, int], dict[int, str]]] = []

        def missing() -> str | None:
            metadata, nodes = metadata_and_brokers(self.admin.admin, 10)
            topic = metadata.topics.get(LOAD_TOPIC)
            if topic is None or not topic.partitions:
                return "the cluster's metadata does not show the topic yet"
            leaders = {p.id: p.leader for p in topic.partitions.values()}
            if any(leader < 0 for leader in leaders.values()):
                return f"partitions without a leader: {sorted(p for p, leader in leaders.items() if leader < 0)}"
            found.append((leaders, {n.id: broker_lane(n.rack) for n in nodes}))
            return None

        wait_until(f"load topic {LOAD_TOPIC}", timeout, missing)
        return found[-1]

    def stop(self) -> dict:
        """Stops producing and consuming; the summary per lane."""
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=30)
        if self._producer is not None:
            self._producer.flush(10)
        for consumer in (self._consumer, self._behind):
            if consumer is not None:
                consumer.close()
        return self.summary()

    def summary(self) -> dict:
        seconds = max(time.monotonic() - self._started, 1e-9) if self._started else 0.0
        out: dict = {"rate_per_partition": self._rate, "record_size": self.config.record_size,
                     "seconds": round(seconds, 1), "stopped_because": self.stopped_because, "lanes": {}}
        for lane, t in self.lanes.items():
            partitions = sum(1 for v in self.partition_lane.values() if v == lane)
            with self._lock:
                latencies = np.array(t.latencies_ms) if t.latencies_ms else None
            out["lanes"][lane] = {
                "partitions": partitions, "sent": t.sent, "acked": t.acked, "failed": t.failed,
                "acked_per_s": round(t.acked / seconds, 1) if seconds else 0.0,
                "consumed_mb_per_s": round(t.consumed_bytes / seconds / 1e6, 3) if seconds else 0.0,
                "catch_up_mb_per_s": round(t.caught_up_bytes / t.caught_up_s / 1e6, 3) if t.caught_up_s else None,
                "produce_latency_ms": None if latencies is None else {
                    q: round(float(np.percentile(latencies, p)), 2) for q, p in (("p50", 50), ("p99", 99))}}
        return out

    def _delivered(self, lane: _Lane, partition: int, err, msg) -> None:
        if err is None:
            lane.acked += 1
            latency = msg.latency()
            if latency is not None:
                with self._lock:
                    if len(lane.latencies_ms) < MAX_LATENCIES:
                        lane.latencies_ms.append(latency * 1000)
                    self._interval_latencies["produce"][partition].append(latency * 1000)
        else:
            lane.failed += 1

    def _fresh_intervals(self) -> dict[str, dict[int, list[float]]]:
        return {source: {p: [] for p in self.partition_leader} for source in ("produce", "consume")}

    def _report_loop(self) -> None:
        """Every interval, each partition's produce and consume latency quantiles as readings of its leader."""
        assert self.emit is not None
        while not self._stop.wait(self.config.interval):
            at = float(int(time.time() * 1000))
            with self._lock:
                taken, self._interval_latencies = self._interval_latencies, self._fresh_intervals()
            for metric in LOAD_METRICS:
                if metric.quantile is None:
                    continue  # catch-up readings come from their own loop
                for partition, latencies in sorted(taken[metric.source].items()):
                    if len(latencies) < MIN_REPORTED:
                        continue
                    leader = self.partition_leader[partition]
                    lane: Lane = "canary" if self.partition_lane[partition] == "canary" else "baseline"
                    value = float(np.quantile(latencies, metric.quantile))
                    self.emit(BrokerReading(self.config.run_id, "load", leader, lane, metric.name, value, at))

    def _catch_up_loop(self) -> None:
        """Every interval, each partition's catch-up rate (bytes/s) as a reading of its leader."""
        assert self.emit is not None
        metric = next(m for m in LOAD_METRICS if m.source == "catch_up")
        while not self._stop.wait(self.config.interval):
            at = float(int(time.time() * 1000))
            for partition, (read, seconds) in sorted(self._catch_up_once().items()):
                lane_name = self.partition_lane[partition]
                with self._lock:
                    self.lanes[lane_name].caught_up_bytes += read
                    self.lanes[lane_name].caught_up_s += seconds
                lane: Lane = "canary" if lane_name == "canary" else "baseline"
                self.emit(BrokerReading(self.config.run_id, "load", self.partition_leader[partition], lane,
                                        metric.name, read / seconds, at))

    def _catch_up_once(self) -> dict[int, tuple[int, float]]:
        """Each partition's latest `catch_up_bytes` read back from behind, one leader at a time
        (canary.probe.catch_up), within half an interval."""
        assert self._behind is not None
        c = self.config
        records = max(2 * MIN_RECORDS, c.catch_up_bytes // c.record_size + 1)
        by_leader: dict[int, list[Backlog]] = {}
        for partition, leader in sorted(self.partition_leader.items()):
            by_leader.setdefault(leader, []).append(Backlog(LOAD_TOPIC, partition, records, c.catch_up_bytes))
        read = read_each_leader(self._behind, by_leader, c.interval / 2, self._stop)
        return {partition: (caught.bytes, caught.seconds) for (_, partition), caught in read.items()}

    def _produce_loop(self) -> None:
        """Paced in 10 ms ticks: every partition gets its due records each tick, so the lanes' load stays equal."""
        assert self._producer is not None
        producer, c = self._producer, self.config
        values = payloads(c.record_size)
        partitions = [(p, self.lanes[lane], functools.partial(self._delivered, self.lanes[lane], p))
                      for p, lane in sorted(self.partition_lane.items())]
        start, done = time.monotonic(), 0
        while not self._stop.is_set():
            due = int((time.monotonic() - start) * self._rate) - done
            for i in range(due):
                value = values[(done + i) % len(values)]  # the same value into every partition: equal lanes
                for p, lane, delivered in partitions:
                    try:
                        producer.produce(LOAD_TOPIC, value=value, partition=p, on_delivery=delivered)
                    except BufferError:  # the cluster does not keep up: count it as failed, do not block
                        lane.failed += 1
                    lane.sent += 1
            done += max(due, 0)
            producer.poll(0)
            sent = sum(t.sent for t in self.lanes.values())
            failed = sum(t.failed for t in self.lanes.values())
            if sent >= 1000 and failed > c.max_error_share * sent:
                self.stopped_because = f"{failed} of {sent} load records failed"
                return
            time.sleep(0.01)

    def _consume_loop(self) -> None:
        assert self._consumer is not None
        while not self._stop.is_set():
            try:
                messages = self._consumer.consume(1000, timeout=0.2)
            except KafkaException:
                continue
            now_ms = time.time() * 1000
            delays: dict[int, list[float]] = {}
            for msg in messages:
                partition = msg.partition()
                if msg.error() is None and partition is not None:
                    lane = self.lanes[self.partition_lane.get(partition, "baseline")]
                    lane.consumed += 1
                    lane.consumed_bytes += len(msg.value() or b"")
                    # The record's create time, stamped by our producer when it was produced: the delay covers
                    # acknowledgement, replication up to the high watermark and the fetch.
                    delays.setdefault(partition, []).append(now_ms - msg.timestamp()[1])
            with self._lock:
                for partition, values in delays.items():
                    self._interval_latencies["consume"].setdefault(partition, []).extend(values)
