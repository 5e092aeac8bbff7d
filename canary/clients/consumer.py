"""LaneConsumer: a confluent_kafka.Consumer that reads only its lane's partitions, from the committed offsets.

    consumer = LaneConsumer({"bootstrap.servers": servers, "group.id": "billing",
                             "client.id": "billing-canary-0", "auto.offset.reset": "earliest"}, ["orders"])
    for msg in consumer.messages(stop):
        with consumer.processing(msg):  # timed; a raised exception is a processing error, the record not stored
            handle(msg)
    consumer.close()

Why `assign()` and not `subscribe()`: a group's partitions are handed out by an assignor that knows nothing of lanes.
With the classic protocol the assignor runs in the group leader, and confluent-kafka offers no custom one; with
`group.protocol=consumer` (KIP-848) assignment is server-side (`uniform`, `range`) and client-side assignors are not
supported at all. So each instance assigns itself its lane's partitions (`incremental_assign`), starting at the
group's committed offsets (`committed()`), and the group id only stores offsets. This works the same with both
protocols, and a partition that changes lane is handed over through those commits: the instance that loses it
commits what it processed and lets go, the lane that gains it starts from that commit (at least once: records
processed but not yet committed may be seen twice).

Consequences the caller must know:
- All instances of a service that share the group id must be lane consumers (a subscribed member would make the
  broker refuse the plain commits, and would read every lane).
- Several instances in one lane split its partitions by `instance`/`instances` (round robin over the lane's sorted
  partitions), a static split like a StatefulSet's ordinals; default one instance per lane.
- Offsets are stored when processing ends without an error (`processing()`) or when `messages()` moves on to the
  next record, and committed by librdkafka's auto-commit (`enable.auto.commit`, default on), on losing a partition
  and on close. A record whose processing raised is not stored: a service that dies of it (or stops) leaves it to
  the partition's next owner, which processes it again.
- A service that catches the error and goes on (`process()` does) gets the lane's policy (`hold_failed`):
  - the **canary lane holds** a record it failed that the fleet wrote: the partition is paused at it and the record
    retried (0.1 s, doubling to 0.5 s; every attempt a processing error), nothing after it stored. A version on
    trial never commits past what it could not process: on a rollback the record goes back, with the partition,
    to the version that could. Records a canary client wrote (canary.lanes.LANE_HEADER) are the canary's own
    output, skipped like the baseline's: held, a bad version's poison would be handed to the baseline.
  - the **baseline lane skips** it (stores the records after it), as the service does in production; each skip is
    counted and observed as a processing error.
- A new partition without a committed offset starts where `auto.offset.reset` says; use `earliest` so records sent
  to a partition before its lane's consumer arrived are not skipped.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from confluent_kafka import OFFSET_INVALID, TIMESTAMP_NOT_AVAILABLE, Consumer, KafkaError, KafkaException, Message
from confluent_kafka import TopicPartition as TP

from canary.clients import outputs
from canary.clients.holds import HeldRecords, Partition
from canary.clients.metrics import ClientMetrics
from canary.clients.observe import ClientObserver, open_sink, run_id_for
from canary.clients.view import LaneSource, LaneView, TopicLanes
from canary.kafka.clients import position
from canary.lanes import canary_written, config_lane
from canary.observations import LANES, Lane
from canary.probe.sink import ObservationSink

log = logging.getLogger(__name__)


def lane_assignment(views: Iterable[TopicLanes], lane: Lane, instance: int = 0, instances: int = 1,
                    current: Iterable[Partition] = ()) -> set[Partition]:
    """The (topic, partition)s one instance of a `lane` consumer reads: its lane's partitions of every topic, sorted,
    every `instances`-th from `instance`. A partition without a leader keeps the instance that has it (nobody can
    fetch from it, and it usually comes back in the same lane)."""
    views = list(views)
    held = set(current)
    ours = sorted((v.topic, p) for v in views for p in v.all
                  if v.lane_of(p) == lane or (v.lane_of(p) is None and (v.topic, p) in held))
    return set(ours[instance::instances])


def _truthy(value: Any, default: bool) -> bool:
    if value is None:
        return default
    return value if isinstance(value, bool) else str(value).strip().lower() in ("true", "1", "yes")


class LaneConsumer:
    """Reads its lane's partitions of `topics` with a manually assigned confluent_kafka.Consumer.

    config: the service's librdkafka consumer settings; `group.id` is required (offset storage only), and
    `enable.auto.offset.store` defaults to false here (offsets are stored after processing). Either
    `group.protocol` works. lane: default from the client marker in `client.id` or `group.instance.id`.
    instance / instances: this instance's share of its lane (0-based ordinal and count). hold_failed: hold a record
    whose processing raised instead of going on past it (default: in the canary lane, for records the fleet wrote).
    view, refresh_interval, metrics, observations, run_id: as for LaneProducer. consumer: a ready Consumer-like
    client (tests).
    """

    def __init__(self, config: Mapping[str, Any], topics: str | Iterable[str], *, lane: Lane | None = None,
                 instance: int = 0, instances: int = 1, view: LaneSource | None = None,
                 refresh_interval: float = 10.0, metrics: ClientMetrics | None = None,
                 observations: ObservationSink | bool = False, run_id: str | None = None,
                 commit_timeout: float = 10.0, hold_failed: bool | None = None, consumer: Any = None):
        if lane is not None and lane not in LANES:
            raise ValueError(f"lane must be one of {LANES}, got {lane!r}")
        if not config.get("group.id"):
            raise ValueError("a lane consumer needs group.id: its committed offsets are where each lane starts "
                             "and how partitions pass between lanes")
        if instances < 1 or not 0 <= instance < instances:
            raise ValueError(f"instance must be in 0..instances-1 and instances >= 1, got {instance}/{instances}")
        self.topics = [topics] if isinstance(topics, str) else list(dict.fromkeys(topics))
        if not self.topics:
            raise ValueError("a lane consumer needs at least one topic")
        self.lane: Lane = lane or config_lane(config)
        self.instance, self.instances = instance, instances
        self.hold_failed = self.lane == "canary" if hold_failed is None else hold_failed
        # The instance's name in metrics and observations: a static member's id names one instance, while a
        # client.id is often shared by all instances of a service.
        self.client_id = str(config.get("group.instance.id") or config.get("client.id") or "rdkafka")
        self.metrics = metrics or ClientMetrics.default()
        self.commit_timeout = commit_timeout
        self._auto_commit = _truthy(config.get("enable.auto.commit"), True)
        self._own_view = view is None
        self.view: LaneSource = view if view is not None else LaneView(config, self.topics, interval=refresh_interval)
        self._consumer = consumer
        self._sink: ObservationSink | None = None
        self._own_sink = False
        self._observer: ClientObserver | None = None
        try:
            if observations:
                run = run_id_for(run_id)
                self._sink, self._own_sink = open_sink(observations, config,
                                                       self.view if isinstance(self.view, LaneView) else None)
                self._observer = ClientObserver(self._sink, run, self.client_id, self.lane)
            if self._consumer is None:
                self._consumer = Consumer({"enable.auto.offset.store": False, **config})
        except BaseException:
            self._close_helpers()
            raise
        self.assignment: set[Partition] = set()
        self.start_offsets: dict[Partition, int] = {}   # where each partition started (committed offset, or reset)
        self.closed = False
        self._seen_version: int | None = None
        self._stored: dict[Partition, int] = {}
        self._last: tuple[Message | None, float] = (None, 0.0)
        self._failed: Message | None = None  # the last record whose processing raised: never stored
        self._held = HeldRecords(self._consumer, self.client_id)  # paused at a record that failed, until its retry
        self._writes = False  # its processing has written a record (canary.clients.outputs)
        self._lock = threading.Lock()
        self._reassign()
        log.info("lane consumer %s in the %s lane (instance %d of %d): %s", self.client_id, self.lane, instance,
                 instances, sorted(self.assignment))

    @property
    def consumer(self) -> Consumer:
        """The wrapped client."""
        return self._consumer

    # ----- assignment -----

    def _reassign(self) -> None:
        """Follows the lane view: lets go of partitions that left the lane (committing first), takes the new ones at
        their committed offsets. Runs on the polling thread, whenever the view's version moved."""
        version = self.view.version
        if version == self._seen_version:
            return
        views = [self.view.get(t) for t in self.topics]
        wanted = lane_assignment(views, self.lane, self.instance, self.instances, self.assignment)
        self._seen_version = version
        gone, new = self.assignment - wanted, wanted - self.assignment
        if gone:
            self._commit([p for p in gone if p in self._stored])
            self._consumer.incremental_unassign([TP(t, p) for t, p in sorted(gone)])
            for key in gone:
                self._stored.pop(key, None)
                self._held.release(key)
            log.info("lane consumer %s: %s left the %s lane; committed and released", self.client_id, sorted(gone),
                     self.lane)
        if new:
            starts = self._committed(sorted(new))
            self._consumer.incremental_assign([TP(t, p, starts[(t, p)]) for t, p in sorted(new)])
            self.start_offsets.update(starts)
            shown = {f"{t}-{p}": "auto.offset.reset" if o == OFFSET_INVALID else o
                     for (t, p), o in sorted(starts.items())}
            log.info("lane consumer %s: reading from %s", self.client_id, shown)
        self.assignment = wanted
        m = self.metrics
        for topic in self.topics:
            m.child(m.assigned, self.client_id, topic, self.lane).set(sum(1 for t, _ in wanted if t == topic))

    def _committed(self, partitions: list[Partition]) -> dict[Partition, int]:
        """The group's committed offsets; OFFSET_INVALID (librdkafka then reads the commit itself, or applies
        auto.offset.reset) where there is none or the coordinator did not answer in time."""
        starts = dict.fromkeys(partitions, OFFSET_INVALID)
        deadline = time.monotonic() + self.commit_timeout
        while True:
            try:
                found = self._consumer.committed([TP(t, p) for t, p in partitions], timeout=self.commit_timeout)
                break
            except KafkaException as exc:  # e.g. NOT_COORDINATOR while the offsets topic is being created
                if time.monotonic() >= deadline:
                    log.warning("lane consumer %s: committed offsets of %s not read (%s); librdkafka reads them at "
                                "assignment", self.client_id, partitions, exc.args[0].str())
                    return starts
                time.sleep(0.5)
        for tp in found:
            if tp.error is None and tp.offset >= 0:
                starts[(tp.topic, tp.partition)] = tp.offset
        return starts

    def _commit(self, partitions: Iterable[Partition], force: bool = False) -> None:
        """Commits the stored offsets of `partitions` (only with auto-commit on, unless `force`)."""
        offsets = [TP(t, p, self._stored[(t, p)]) for t, p in partitions if (t, p) in self._stored]
        if not offsets or not (self._auto_commit or force):
            return
        try:
            self._consumer.commit(offsets=offsets, asynchronous=False)
        except KafkaException as exc:  # the next owner starts earlier: duplicates, never a gap
            log.warning("lane consumer %s: committing %s failed: %s", self.client_id, offsets, exc.args[0].str())

    # ----- reading -----

    def poll(self, timeout: float = 1.0) -> Message | None:
        """The next record of this lane's partitions, or None within `timeout` seconds. Fetch errors are counted
        (kafka_canary_client_consume_error) and make the view refresh; a fatal one is raised (KafkaException)."""
        self._reassign()
        self._held.retry_due()
        msg = self._consumer.poll(self._held.poll_timeout(timeout))  # wakes for the next retry
        if self._sink is not None:
            self._sink.poll(0)
        if msg is None:
            return None
        err = msg.error()
        if err is not None:
            if err.code() != KafkaError._PARTITION_EOF:
                self.metrics.child(self.metrics.consume_errors, self.client_id, self.lane).inc()
                self.view.refresh_soon()
                if err.fatal():
                    raise KafkaException(err)
                log.debug("lane consumer %s: %s", self.client_id, err.str())
            return None
        key = (msg.topic(), msg.partition())
        if key not in self.assignment:  # fetched just before the partition left the lane: its new lane reads it
            return None
        if self._held.drops(key, msg.offset()):  # fetched before the hold, or the rewind did not take
            return None
        m = self.metrics
        m.child(m.consumed, self.client_id, key[0], str(key[1]), self.lane).inc()
        self._last = (msg, round(time.time() * 1000, 3))
        return msg

    def messages(self, stop: threading.Event | None = None, poll_timeout: float = 1.0) -> Iterator[Message]:
        """Records until `stop` is set or the consumer is closed. Asking for the next record marks the previous one
        processed (its offset is stored for the next commit)."""
        previous: Message | None = None
        while not self.closed and not (stop is not None and stop.is_set()):
            if previous is not None:
                if previous is not self._failed:
                    self.store(previous)
                previous = None
            msg = self.poll(poll_timeout)
            if msg is not None:
                previous = msg
                yield msg
        if previous is not None and previous is not self._failed and not self.closed:
            self.store(previous)

    def store(self, msg: Message) -> None:
        """Marks `msg` processed: its offset + 1 is committed next (auto-commit, losing the partition, close)."""
        topic, partition, offset = position(msg)
        key = (topic, partition)
        if key not in self.assignment:
            return
        if self._held.blocks(key, offset):  # never past a held record
            return
        self._stored[key] = max(self._stored.get(key, 0), offset + 1)
        with contextlib.suppress(KafkaException):  # partition released meanwhile: its new owner re-reads it
            self._consumer.store_offsets(offsets=[TP(topic, partition, offset + 1)])

    def _hold(self, msg: Message) -> None:
        """Holds `msg` (canary.clients.holds) while its partition is still this consumer's."""
        topic, partition, _ = position(msg)
        if (topic, partition) in self.assignment:
            self._held.hold(msg)

    @contextlib.contextmanager
    def processing(self, msg: Message) -> Iterator[None]:
        """Wraps the processing of one record: records its processing time, lag, outcome (an exception raised
        inside is a processing error, recorded and raised again) and how many records a LaneProducer of this thread
        wrote meanwhile (canary.clients.outputs; once this consumer's processing has written anything: a service
        that never writes has no outputs to count); stores its offset only when it did not raise."""
        last, polled_ms = self._last
        receive_ts = polled_ms if last is msg else round(time.time() * 1000, 3)
        started = time.perf_counter()
        with outputs.counting() as written:
            try:
                yield
            except Exception as exc:
                self._processed(msg, receive_ts, (time.perf_counter() - started) * 1000,
                                f"{type(exc).__name__}: {exc}"[:500], self._outputs(written[0]))
                self._failed = msg
                if self.hold_failed and not canary_written(msg.headers()):
                    self._hold(msg)
                raise
        self._processed(msg, receive_ts, (time.perf_counter() - started) * 1000, None, self._outputs(written[0]))
        topic, partition, offset = position(msg)
        if self._held.at((topic, partition), offset):  # its retry succeeded
            self._held.release((topic, partition))
        self.store(msg)

    def _outputs(self, written: int) -> int | None:
        """What a record's observation says of its outputs: None until this consumer's processing first wrote."""
        self._writes = self._writes or written > 0
        return written if self._writes else None

    def process(self, handler: Callable[[Message], object], stop: threading.Event | None = None,
                max_messages: int | None = None, duration: float | None = None, poll_timeout: float = 1.0) -> int:
        """Runs `handler` on every record until `stop`, `max_messages` or `duration` seconds; an exception from the
        handler is a processing error (logged once per type, counted, observed) and the loop goes on: past the
        record (stored: skipped), or, when it is held (`hold_failed`), to the other partitions while it waits for
        its retry. Returns how many records were handled, attempts included."""
        handled = 0
        logged: set[str] = set()
        deadline = None if duration is None else time.monotonic() + duration
        while not self.closed and not (stop is not None and stop.is_set()):
            if max_messages is not None and handled >= max_messages:
                break
            if deadline is not None and time.monotonic() >= deadline:
                break
            msg = self.poll(poll_timeout if deadline is None else max(0.0, min(poll_timeout,
                                                                                 deadline - time.monotonic())))
            if msg is None:
                continue
            handled += 1
            try:
                with self.processing(msg):
                    handler(msg)
            except Exception as exc:
                self.store(msg)  # skipped, as its observation says, unless held (store() goes no further)
                if type(exc).__name__ not in logged:
                    logged.add(type(exc).__name__)
                    log.warning("lane consumer %s: processing failed: %r", self.client_id, exc)
        return handled

    def _processed(self, msg: Message, receive_ts: float, elapsed_ms: float, error: str | None,
                   written: int | None = None) -> None:
        topic, partition, offset = position(msg)
        m = self.metrics
        m.child(m.processing_latency, self.client_id, topic, self.lane).observe(elapsed_ms / 1000)
        if error is not None:
            m.child(m.processing_errors, self.client_id, topic, self.lane).inc()
        lag = None
        with contextlib.suppress(KafkaException, RuntimeError):
            _, high = self._consumer.get_watermark_offsets(TP(topic, partition), cached=True)
            if high is not None and high >= 0:
                lag = max(0, high - offset - 1)
                m.child(m.lag, self.client_id, topic, str(partition), self.lane).set(lag)
        if self._observer is not None:
            kind, ts = msg.timestamp()
            send_ts = ts if kind != TIMESTAMP_NOT_AVAILABLE and ts > 0 else receive_ts
            if error is not None and self._held.at((topic, partition), offset):
                send_ts = receive_ts  # a failed retry is an event of its own: judged when it happened
            self._observer.processed(topic, partition, self.view.get(topic).leader_of(partition), offset, send_ts,
                                     receive_ts, elapsed_ms, lag, error, written)

    # ----- committing and closing -----

    def commit(self) -> None:
        """Commits every stored offset now (synchronously)."""
        with self._lock:
            self._commit(list(self._stored), force=True)

    def close(self) -> None:
        """Commits what was processed, closes the client, then what this consumer owns (its view, its sink)."""
        if self.closed:
            return
        self.closed = True
        try:
            self._commit(list(self._stored))
            self._consumer.close()
        finally:
            self._close_helpers()

    def _close_helpers(self) -> None:
        try:
            if self._own_sink and self._sink is not None:
                self._sink.close()
            elif self._sink is not None:
                self._sink.poll(0)
        finally:
            if self._own_view and isinstance(self.view, LaneView):
                self.view.close()

    def __enter__(self) -> LaneConsumer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
