"""LaneProducer: a confluent_kafka.Producer whose records stay in its lane's partitions.

    producer = LaneProducer({"bootstrap.servers": servers, "client.id": "orders-canary-1"})
    producer.produce("orders", value=b"...", key=b"customer-42")   # a canary partition of "orders"
    producer.poll(0)                                                # delivery reports, as with Producer
    producer.close()

The lane comes from the client marker in `client.id` (canary.lanes.config_lane) or from `lane=`. In the canary
lane every record carries the header `kafka-canary-lane: canary` (canary.lanes.LANE_HEADER; `mark_records=False`
leaves records as the service writes them): a canary consumer settles its own lane's records and hands back the
fleet's (canary.clients.consumer). The partition
rules (lane filter, keys, fallback) are in canary.clients.partitioner; the partitions' lanes come from a LaneView
that follows leadership. Delivery reports record produce latency and errors in Prometheus (canary.clients.metrics)
and, with `observations=`, as observations (canary.clients.observe).
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from confluent_kafka import Producer

from canary.clients import outputs
from canary.clients.metrics import ClientMetrics
from canary.clients.observe import ClientObserver, open_sink, run_id_for
from canary.clients.partitioner import UNASSIGNED, LanePartitioner, PartitionChoice, candidates
from canary.clients.view import LaneSource, LaneView
from canary.kafka.clients import PRODUCER_DEFAULTS
from canary.lanes import CANARY_HEADER_VALUE, LANE_HEADER, config_lane
from canary.observations import LANES, Lane
from canary.probe.sink import ObservationSink

log = logging.getLogger(__name__)

DeliveryCallback = Callable[[Any, Any], None]


def _now_ms() -> float:
    return round(time.time() * 1000, 3)  # to the microsecond (observations keep the fraction)


def _acknowledged_ms(send_ts: float, err, msg) -> float:
    """When the broker's acknowledgement arrived: librdkafka's own latency of the record (from produce() to the
    response), not when the application got round to polling for its delivery report, so a service that polls
    once a second is measured as fast as one that polls after every record. Now, when the client has no latency
    (an error, an older librdkafka)."""
    latency = msg.latency() if err is None and msg is not None and hasattr(msg, "latency") else None
    return round(send_ts + latency * 1000, 3) if latency is not None else _now_ms()


def _marked(headers: Any) -> Any:
    """`headers` (None, a mapping or a list of pairs, as confluent_kafka takes them) with the canary header."""
    if headers is None:
        return [(LANE_HEADER, CANARY_HEADER_VALUE)]
    if isinstance(headers, Mapping):
        return {**headers, LANE_HEADER: CANARY_HEADER_VALUE}
    return [*headers, (LANE_HEADER, CANARY_HEADER_VALUE)]


class LaneProducer:
    """Sends each record to a partition of its own lane; falls back to every partition when its lane has none.

    config: the librdkafka settings of the service's producer, passed to confluent_kafka.Producer unchanged.
    lane: 'canary' or 'baseline'; default: from the client marker in `client.id`.
    topics: topics to follow from the start (others are looked up on their first produce, which then waits for
    one metadata request). view: a shared LaneView (or any LaneSource); default: one of its own, refreshed every
    `refresh_interval` seconds and after every failed delivery. metrics: default ClientMetrics.default().
    observations: an ObservationSink to share, True for one of its own writing to the observations topic of this
    cluster, False (default) for none. run_id: the observations' run id (default $KAFKA_CANARY_RUN_ID).
    mark_records: in the canary lane, add the canary header to every record (default).
    producer: a ready Producer-like client instead of one built from config (tests).
    """

    def __init__(self, config: Mapping[str, Any], *, lane: Lane | None = None, topics: Iterable[str] = (),
                 view: LaneSource | None = None, refresh_interval: float = 10.0,
                 metrics: ClientMetrics | None = None, observations: ObservationSink | bool = False,
                 run_id: str | None = None, mark_records: bool = True, producer: Any = None):
        if lane is not None and lane not in LANES:
            raise ValueError(f"lane must be one of {LANES}, got {lane!r}")
        self.lane: Lane = lane or config_lane(config)
        self.client_id = str(config.get("client.id") or "rdkafka")
        self.metrics = metrics or ClientMetrics.default()
        self.mark_records = mark_records and self.lane == "canary"
        self._own_view = view is None
        self.view: LaneSource = view if view is not None else LaneView(config, topics, interval=refresh_interval)
        self._producer = producer
        self._sink: ObservationSink | None = None
        self._own_sink = False
        try:
            self._observer = None
            if observations:
                run = run_id_for(run_id)
                self._sink, self._own_sink = open_sink(observations, config,
                                                       self.view if isinstance(self.view, LaneView) else None)
                self._observer = ClientObserver(self._sink, run, self.client_id, self.lane)
            if self._producer is None:
                self._producer = Producer({**PRODUCER_DEFAULTS, **config})
        except BaseException:
            self._close_helpers()
            raise
        for topic in topics:
            self.view.get(topic)
        self.partitioner = LanePartitioner(self.lane)
        self.falling_back: dict[str, bool] = {}
        self._epoch = uuid.uuid4().hex[:8]
        self._sent = itertools.count()
        self._seqs: dict[tuple[str, int], itertools.count] = {}
        self._lock = threading.Lock()
        log.info("lane producer %s in the %s lane", self.client_id, self.lane)

    @property
    def producer(self) -> Producer:
        """The wrapped client, for what the lane rules do not cover (explicit partitions leave the lane)."""
        return self._producer

    def lane_partitions(self, topic: str) -> tuple[tuple[int, ...], bool]:
        """The partitions produce() chooses from now, and whether that is the fallback."""
        return candidates(self.view.get(topic), self.lane)

    def produce(self, topic: str, value: str | bytes | None = None, key: str | bytes | None = None,
                headers: Any = None, on_delivery: DeliveryCallback | None = None, timestamp: int = 0) -> int:
        """Sends one record to a partition of this producer's lane (see canary.clients.partitioner) and returns
        the partition (-1 when the topic's partitions are not known yet and librdkafka chooses). `on_delivery`
        is called like confluent_kafka's, from poll() or flush(). Raises what Producer.produce raises (BufferError
        when the queue is full: poll and retry)."""
        choice = self.partitioner.choose(self.view.get(topic), key)
        self._note_fallback(topic, choice.fallback)
        kwargs: dict[str, Any] = {"on_delivery": self._callback(topic, choice, on_delivery)}
        if self.mark_records:
            headers = _marked(headers)
        if headers is not None:
            kwargs["headers"] = headers
        if timestamp:
            kwargs["timestamp"] = timestamp
        if choice.partition != UNASSIGNED:
            kwargs["partition"] = choice.partition
        self._producer.produce(topic, value, key, **kwargs)
        outputs.produced()
        m = self.metrics
        m.child(m.produced, self.client_id, topic, str(choice.partition), self.lane).inc()
        if choice.fallback:
            m.child(m.fallback_records, self.client_id, topic, self.lane).inc()
        return choice.partition

    def _callback(self, topic: str, choice: PartitionChoice, user: DeliveryCallback | None) -> DeliveryCallback:
        send_ts = _now_ms()
        observer = self._observer
        if observer is not None:
            message_id = f"{self._epoch}:{next(self._sent)}"
            with self._lock:
                counter = self._seqs.setdefault((topic, choice.partition), itertools.count())
            seq = next(counter)

        def delivered(err, msg) -> None:
            ack_ts = _acknowledged_ms(send_ts, err, msg)
            partition = msg.partition() if msg is not None and msg.partition() is not None and msg.partition() >= 0 \
                else choice.partition
            m = self.metrics
            if err is None:
                m.child(m.produce_latency, self.client_id, topic, self.lane).observe((ack_ts - send_ts) / 1000)
            else:
                m.child(m.produce_errors, self.client_id, topic, str(partition), self.lane).inc()
                self.view.refresh_soon()  # a moved leader is the usual cause
            if observer is not None:
                observer.produced(topic, partition, choice.leader, message_id, seq, send_ts, ack_ts,
                                  None if err is None else err.str())
            if user is not None:
                user(err, msg)
        return delivered

    def _note_fallback(self, topic: str, fallback: bool) -> None:
        if self.falling_back.get(topic) == fallback:
            return
        with self._lock:
            was = self.falling_back.get(topic)
            if was == fallback:
                return
            self.falling_back[topic] = fallback
        self.metrics.child(self.metrics.fallback, self.client_id, topic, self.lane).set(1 if fallback else 0)
        if fallback:
            log.warning("producer %s: topic %s has no %s partition; sending to all partitions until it has one "
                        "(fallback, availability first)", self.client_id, topic, self.lane)
        elif was:
            log.info("producer %s: topic %s has %s partitions again; fallback over", self.client_id, topic, self.lane)

    def poll(self, timeout: float = 0.0) -> int:
        """Serves delivery reports (as Producer.poll); returns how many were served."""
        served = self._producer.poll(timeout)
        if self._sink is not None:
            self._sink.poll(0)
        return served

    def flush(self, timeout: float = 30.0) -> int:
        """Waits for every outstanding record's delivery report; returns how many are still outstanding."""
        left = self._producer.flush(timeout)
        if self._sink is not None:
            self._sink.poll(0)
        return left

    def __len__(self) -> int:
        return len(self._producer)

    def close(self, timeout: float = 30.0) -> int:
        """Flushes (up to `timeout` seconds), then closes what this producer owns (its view, its sink). Returns
        the records still undelivered."""
        try:
            left = self.flush(timeout)
        finally:
            self._close_helpers()
        if left:
            log.warning("producer %s closed with %d records undelivered", self.client_id, left)
        return left

    def _close_helpers(self) -> None:
        try:
            if self._own_sink and self._sink is not None:
                self._sink.close()
        finally:
            if self._own_view and isinstance(self.view, LaneView):
                self.view.close()

    def __enter__(self) -> LaneProducer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
