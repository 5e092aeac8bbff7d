"""The probe loop: reconcile the topic, then produce to every owned partition at the configured
rate, consume them back, track every message, and keep metrics, status and observations current.

    probe = Probe(config)
    summary = probe.run()          # for config.duration, or until probe.stop() / Ctrl-C

Threads: producing (and its delivery reports), consuming, housekeeping (SLA expiry, availability gauges),
admin (metadata, reconcile), connection checks, and the optional HTTP server. All are daemons and all
are joined by `stop()`.
"""

from __future__ import annotations

import functools
import math
import threading
import time
import uuid
from dataclasses import asdict

from confluent_kafka import OFFSET_END, Consumer, KafkaError, KafkaException, Producer, TopicPartition

from canary import process
from canary.broker_metrics import BrokerMetricsSource
from canary.errors import CanaryError
from canary.kafka import health
from canary.kafka.admin import TopicAdmin
from canary.kafka.clients import PRODUCER_DEFAULTS, QUIET_LOGGER, position
from canary.observations import OBSERVATIONS_TOPIC
from canary.probe.broker_readings import BrokerReadings
from canary.probe.config import ProbeConfig
from canary.probe.connection import ConnectionCheck, check_broker
from canary.probe.http import StatusServer
from canary.probe.metrics import ProbeMetrics
from canary.probe.sink import ObservationSink, ensure_observations_topic
from canary.probe.stats import Ledger, lanes_of
from canary.probe.topic import ReconcileResult, TopicSpec
from canary.probe.tracker import Tracker, TrackerIdentity
from canary.probe.view import ClusterView, ProbeSummary, reconciled

# How long a thread with nothing to do waits for its client before it looks at the stop flag again: each wakeup
# costs the probe CPU (on a shared 2-core machine ~0.1 ms), which at low rates is most of what it spends.
IDLE_WAIT = 0.5


class ClusterUnreachable(CanaryError):
    """The cluster could not be reached at all."""


class Probe:
    """`broker_metrics`: a source of each broker's own metrics, read every `config.broker_metrics_interval` seconds
    into the observations (canary.probe.broker_readings); None reads none."""

    def __init__(self, config: ProbeConfig, metrics: ProbeMetrics | None = None,
                 broker_metrics: BrokerMetricsSource | None = None):
        self.config = config
        self.metrics = metrics or ProbeMetrics()
        self.epoch = uuid.uuid4().hex[:8]
        self.ledger = Ledger(config.status_window)
        obs_topic = OBSERVATIONS_TOPIC if config.observations_topic is None else config.observations_topic
        self.observations_topic = obs_topic or None
        self.sink = ObservationSink(config.bootstrap_servers, self.observations_topic, config.client,
                                    config.observations_file)
        self.tracker = Tracker(TrackerIdentity(config.run_id, config.topic, config.producer_id, self.epoch),
                               config.rtt_sla * 1000, self.sink.emit, self.metrics, self.ledger)
        self.admin = TopicAdmin(config.bootstrap_servers, config.client, away_grace=config.away_grace)
        self.spec = TopicSpec(config.topic)
        self.view = ClusterView(config.canary_brokers)
        self.readings = None if broker_metrics is None else BrokerReadings(
            broker_metrics, config.broker_metrics_interval, config.run_id, f"probe-{config.producer_id}",
            self.view.lane_of, self.sink.emit)
        self.reconciled: ReconcileResult | None = None
        self.reconcile_errors: list[str] = []
        self.connection_checks: dict[int, ConnectionCheck] = {}
        self.http: StatusServer | None = None
        self._partitions: list[int] = []          # produced to (owned by a live broker)
        self._assigned: set[int] = set()
        self._stop = threading.Event()
        self._stop_producing = threading.Event()
        self._threads: list[threading.Thread] = []
        self._heartbeat = time.monotonic()
        self._started = 0.0
        self._round_trip_ok = False
        self._producer: Producer | None = None
        self._consumer: Consumer | None = None
        self._lock = threading.Lock()

    # ----- life cycle -----

    def check_local(self) -> None:
        """What can be checked without the cluster, checked before it is touched (topics, groups): the HTTP port
        is free. Raises PortInUseError."""
        c = self.config
        if c.http_port is not None:
            process.require_free(c.http_port, "the probe's HTTP endpoints", c.http_host, "--http-port")

    def start(self) -> None:
        """Connects, reconciles the topic, assigns the consumer, starts the threads.
        Raises ClusterUnreachable when no broker answers."""
        c = self.config
        self.check_local()
        try:
            self._refresh_view()
        except (KafkaException, TimeoutError) as exc:
            # One more look that names the connections' trouble (a refused login, TLS) when there was any.
            cause = health.check(c.bootstrap_servers, [], timeout=5, client_config=c.client).error
            raise ClusterUnreachable(f"cannot reach the cluster at {c.bootstrap_servers}: {exc.args[0]}; check "
                                     f"--bootstrap-servers and the security settings"
                                     + (f" ({cause})" if cause else "")) from exc
        self._reconcile()
        if self.observations_topic:
            ensure_observations_topic(self.admin.admin, self.observations_topic, len(self.view.lanes))
        base = {"bootstrap.servers": c.bootstrap_servers, "logger": QUIET_LOGGER}
        # Not idempotent by default: an idempotent producer's epoch bump after one partition's timeout
        # fails the in-flight messages of every partition, which would blur the per-broker picture.
        self._producer = Producer({**base, **PRODUCER_DEFAULTS, "acks": "all", "enable.idempotence": False,
                                   "linger.ms": 0,
                                   "message.timeout.ms": int(c.message_timeout * 1000),
                                   "queue.buffering.max.messages": 1_000_000,
                                   "client.id": f"kafka-canary-probe-{c.producer_id}", **c.client})
        self._consumer = Consumer({**base, "group.id": f"kafka-canary-probe-{c.producer_id}-{self.epoch}",
                                   "enable.auto.commit": False, "auto.offset.reset": "latest",
                                   "fetch.wait.max.ms": 500, "client.id": f"kafka-canary-probe-{c.producer_id}",
                                   **c.client})
        self._assign(self._wanted)
        if c.http_port is not None:
            self.http = StatusServer(c.http_host, c.http_port, self.metrics.registry, self.live, self.ready,
                                     self.status)
        self._started = time.monotonic()
        for target, name in ((self._consume_loop, "consume"),
                             (self._produce_loop, "produce"), (self._housekeeping_loop, "housekeeping"),
                             (self._admin_loop, "admin"), (self._connection_loop, "connections"),
                             *([(self._readings_loop, "broker-metrics")] if self.readings else [])):
            thread = threading.Thread(target=self._guard(target), name=f"probe-{name}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def run(self) -> ProbeSummary:
        """start(), wait for the duration (or stop()/Ctrl-C), stop(); returns the summary."""
        self.start()
        try:
            deadline = None if self.config.duration is None else time.monotonic() + self.config.duration
            while not self._stop_producing.is_set():
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    break
                self._stop_producing.wait(1.0 if remaining is None else min(1.0, remaining))
        finally:
            summary = self.stop()
        return summary

    def stop(self, drain: float | None = None) -> ProbeSummary:
        """Stops producing, waits for outstanding reports and receipts (up to `drain` seconds, by
        default the smaller of the SLA and message timeout + 5 s), stops the rest; returns the summary."""
        self._stop_producing.set()
        drain = min(self.config.rtt_sla, self.config.message_timeout + 5) if drain is None else drain
        if self._producer is not None:
            self._producer.flush(drain)
            deadline = time.monotonic() + drain
            while time.monotonic() < deadline and sum(self.tracker.unresolved().values()) > 0:
                time.sleep(0.1)
        self.tracker.expire(time.time() * 1000)
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=10)
        if self._consumer is not None:
            self._consumer.close()
        self.sink.close()
        if self.http is not None:
            self.http.close()
        return self.summary()

    def _guard(self, target):
        @functools.wraps(target)
        def run() -> None:
            try:
                target()
            except Exception as exc:  # a dead thread must show in /liveness and the summary, not vanish
                self.reconcile_errors.append(f"{target.__name__} stopped: {exc!r}")
                self._stop_producing.set()
                raise
        return run

    # ----- state for HTTP and the CLI -----

    def live(self) -> bool:
        return all(t.is_alive() for t in self._threads) and time.monotonic() - self._heartbeat < 30

    def ready(self) -> bool:
        return self.reconciled is not None and self._round_trip_ok

    def status(self) -> dict:
        since = time.time() * 1000 - self.config.status_window * 1000
        return {
            "run_id": self.config.run_id, "producer_id": self.config.producer_id, "topic": self.config.topic,
            "ready": self.ready(), "window_seconds": self.config.status_window,
            "produce_partitions": {p: self.view.leaders.get(p) for p in self._partitions},
            "lanes": {lane: t.to_dict() for lane, t in self.ledger.by_lane(since).items()},
            "partitions": {p: t.to_dict() for p, t in sorted(self.ledger.by_partition(since).items())},
            "brokers": {b: {"lane": lane, "connection": asdict(self.connection_checks[b])
                            if b in self.connection_checks else None} for b, lane in sorted(self.view.lanes.items())},
            "unresolved": self.tracker.unresolved(), "observations": self.sink.stats(),
            "orphans": self.reconciled.orphans if self.reconciled else [],
            "errors": self.reconcile_errors[-5:],
        }

    def summary(self) -> ProbeSummary:
        return ProbeSummary(
            run_id=self.config.run_id, producer_id=self.config.producer_id, topic=self.config.topic,
            seconds=round(time.monotonic() - self._started, 1) if self._started else 0.0,
            lanes={lane: t.to_dict() for lane, t in sorted(self.ledger.by_lane().items())},
            partitions={p: t.to_dict() for p, t in sorted(self.ledger.by_partition().items())},
            foreign_records=self.tracker.foreign_records, malformed_records=self.tracker.malformed_records,
            unresolved=self.tracker.unresolved(), observations=self.sink.stats(),
            reconcile=self.reconciled.to_dict() if self.reconciled else None,
            connection_checks={b: asdict(c) for b, c in sorted(self.connection_checks.items())},
            broker_readings=self.readings.stats() if self.readings else None)

    # ----- cluster state -----

    def _refresh_view(self) -> None:
        self.view.refresh(self.admin, self.config.topic)

    def _reconcile(self) -> None:
        result = reconciled(self.admin, self.spec, self.config.reconcile, self.reconciled)
        if result.errors:
            self.reconcile_errors.extend(result.errors)
        self.reconciled = result
        if result.changed:
            self._refresh_view()
        self._wanted = sorted(result.produce_partitions)

    def _assign(self, partitions: list[int]) -> None:
        """Assigns new partitions at their current end, before any message is sent to them."""
        new = [p for p in partitions if p not in self._assigned]
        if new:
            consumer = self._clients()[1]
            ends = []
            for p in new:
                try:
                    _, high = consumer.get_watermark_offsets(TopicPartition(self.config.topic, p), timeout=10)
                except KafkaException:
                    high = OFFSET_END
                ends.append(TopicPartition(self.config.topic, p, high))
            consumer.incremental_assign(ends)
            self._assigned.update(new)
        self._partitions = sorted(partitions)

    # ----- threads -----

    def _clients(self) -> tuple[Producer, Consumer]:
        """The producer and consumer start() made: the threads and the assignment run only after it."""
        if self._producer is None or self._consumer is None:
            raise RuntimeError("the probe is not started")
        return self._producer, self._consumer

    def _produce_loop(self) -> None:
        """Each owned partition at its own phase of the round: partition i of n is sent at (round + i/n) / rate.
        A burst to every partition at once has every broker append, wake its followers and serve their fetches at
        the same moment, and on shared cores they queue behind each other: on the local 3-broker cluster a bare
        producer's p50 was 4.3 ms in bursts and 2.4 ms staggered (bench/probe_vs_e2e.py has the probe's).
        Between sends the same thread serves the delivery reports: a thread of their own would wake for each
        report and contend for the interpreter with this one."""
        rate, stopping = self.config.rate, self._stop_producing
        slots, start, partitions = 0, time.monotonic(), self._partitions
        while not stopping.is_set():
            if self._partitions != partitions:  # the owned partitions changed: a new schedule from now
                slots, start, partitions = 0, time.monotonic(), self._partitions
            if not partitions:
                self._serve_reports(IDLE_WAIT)
                continue
            per_second = rate * len(partitions)
            elapsed = time.monotonic() - start
            due = int(elapsed * per_second) + 1 - slots
            if due <= 0:
                self._serve_reports(min(IDLE_WAIT, slots / per_second - elapsed))
                continue
            if due > per_second:  # more than a second behind: skip ahead rather than burst
                slots += due - 1
                due = 1
            for _ in range(due):
                self._send(partitions[slots % len(partitions)])
                slots += 1

    def _serve_reports(self, timeout: float) -> None:
        """Delivery reports of the probe's messages (for up to `timeout` s) and of the observations written.
        The client counts whole milliseconds, so the timeout is rounded up: cut down, the last sub-millisecond
        before a send would spin."""
        self._clients()[0].poll(math.ceil(max(0.0, timeout) * 1000) / 1000)
        self.sink.poll(0)

    def _send(self, partition: int) -> None:
        producer = self._clients()[0]
        leader = self.view.leaders.get(partition)
        if self.config.leaders and leader is not None and leader not in self.config.leaders:
            return  # another broker's partition: not probed (a partition without a leader still is: that is news)
        msg = self.tracker.next_message(partition, leader, self.view.lane_of(leader), time.time() * 1000)
        value = msg.encode(self.config.message_size)
        while True:
            try:
                producer.produce(self.config.topic, value=value, partition=partition,
                                 on_delivery=functools.partial(self._delivered, partition, msg.seq))
                return
            except BufferError:  # the local queue is full: serving reports frees it
                self._serve_reports(0.01)
            except KafkaException as exc:
                self.tracker.failed(partition, msg.seq, str(exc.args[0]), time.time() * 1000)
                return

    def _delivered(self, partition: int, seq: int, err, msg) -> None:
        now = time.time() * 1000
        if err is None:
            latency = msg.latency()  # librdkafka's, taken as the response arrived (seconds, from produce())
            self.tracker.acked(partition, seq, msg.offset(), now, None if latency is None else latency * 1000)
        else:
            self.tracker.failed(partition, seq, err.str(), now)

    def _consume_loop(self) -> None:
        consumer, tracker = self._clients()[1], self.tracker
        while not self._stop.is_set():
            first = consumer.poll(IDLE_WAIT)
            if first is None:
                continue
            now = time.time() * 1000
            batch = [first, *consumer.consume(num_messages=1000, timeout=0)]
            for msg in batch:
                err = msg.error()
                if err is not None:
                    if err.code() != KafkaError._PARTITION_EOF:
                        tracker.consume_error(msg.partition())
                    continue
                _, partition, offset = position(msg)
                tracker.record(partition, offset, msg.value(), now)
            if not self._round_trip_ok:
                lanes = self.ledger.by_lane(latency=False).values()
                self._round_trip_ok = any(t.counts["delivered"] for t in lanes)

    def _readings_loop(self) -> None:
        assert self.readings is not None
        self.readings.loop(self._stop)

    def _housekeeping_loop(self) -> None:
        """Fast and never blocked by the cluster: SLA expiry every second, the availability gauges (a minute's
        window) every 5 s once ready, every second before."""
        ticks = 0
        while not self._stop.wait(1.0):
            self._heartbeat = time.monotonic()
            self.tracker.expire(time.time() * 1000)
            if ticks % 5 == 0 or not self.ready():
                self._update_availability()
            ticks += 1

    def _admin_loop(self) -> None:
        """Metadata refresh and reconciliation; admin calls may block for their timeouts when a broker is down."""
        c = self.config
        last_reconcile = time.monotonic()
        while not self._stop.wait(c.metadata_interval):
            try:
                self._refresh_view()
            except (KafkaException, TimeoutError) as exc:  # keep the last view; try again next interval
                self.reconcile_errors.append(f"metadata: {exc!r}")
            if c.reconcile and time.monotonic() - last_reconcile >= c.reconcile_interval:
                last_reconcile = time.monotonic()
                try:
                    self._reconcile()
                    self._assign(self._wanted)
                except (CanaryError, KafkaException, TimeoutError) as exc:
                    self.reconcile_errors.append(f"reconcile: {exc!r}")

    def _connection_loop(self) -> None:
        while True:
            self._check_connections()
            if self._stop.wait(self.config.connection_interval):
                return

    def _check_connections(self) -> None:
        for broker, address in sorted(self.view.addresses.items()):
            if self._stop.is_set():
                return
            result = check_broker(broker, address, self.config.client, timeout=5.0)
            self.connection_checks[broker] = result
            self.metrics.connection(broker, self.view.lane_of(broker), result.ok, result.latency_ms)

    def _update_availability(self) -> None:
        since = time.time() * 1000 - self.config.status_window * 1000
        tallies = self.ledger.by_lane_partition(since, latency=False)
        for (lane, partition), tally in tallies.items():
            if tally.availability is not None:
                self.metrics.availability.labels(str(partition), lane).set(tally.availability)
        for lane, tally in lanes_of(tallies, latency=False).items():
            if tally.availability is not None:
                self.metrics.lane_availability.labels(lane).set(tally.availability)
        self.metrics.ready.set(1 if self.ready() else 0)
