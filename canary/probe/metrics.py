"""The probe's Prometheus metrics, labelled by partition, leader broker (at send time) and lane. Its own registry,
so several probes can live in one process (tests) without clashing.

Names follow Prometheus's conventions (base units, `_total` counters, unit metadata; `promtool check metrics`
passes), with the Strimzi canary's record names where they fit them: `kafka_canary_` + `records_produced_total`,
`records_produced_failed_total`, `records_consumed_total`, `consumer_error_total`; Strimzi's latency histograms
(`records_produced_latency`, `records_consumed_latency`, in milliseconds) are ours in seconds,
`*_latency_seconds` (docs/metrics.md has the whole mapping)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

# seconds; covers loopback (sub-ms) to a stalled cluster
LATENCY_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.035, 0.05, 0.075, 0.1, 0.15, 0.25, 0.5, 1.0, 2.5, 5.0,
                   10.0, 30.0)
PBL = ("partition", "broker", "lane")


def _broker(leader: int | None) -> str:
    return "none" if leader is None or leader < 0 else str(leader)


class ProbeMetrics:
    def __init__(self, registry: CollectorRegistry | None = None):
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.produced = Counter("kafka_canary_records_produced", "Probe records sent", PBL, registry=r)
        self.acked_counter = Counter("kafka_canary_records_acked", "Probe records acknowledged (acks=all)", PBL,
                                     registry=r)
        self.consumed = Counter("kafka_canary_records_consumed", "Own probe records received", PBL, registry=r)
        self.produce_errors = Counter("kafka_canary_records_produced_failed", "Produce failures (error or timeout)",
                                      PBL, registry=r)
        self.consume_errors = Counter("kafka_canary_consumer_error", "Consume failures and malformed records",
                                      ("partition",), registry=r)
        self.produce_latency = Histogram("kafka_canary_records_produced_latency", "Send to acknowledgement", PBL,
                                         unit="seconds", buckets=LATENCY_BUCKETS, registry=r)
        self.e2e_latency = Histogram("kafka_canary_records_consumed_latency", "Send to receive (end to end)", PBL,
                                     unit="seconds", buckets=LATENCY_BUCKETS, registry=r)
        self.lost = Counter("kafka_canary_records_lost", "Acknowledged but not received (gap or SLA)", PBL,
                            registry=r)
        self.duplicated = Counter("kafka_canary_records_duplicated", "Extra receipts of a record", PBL, registry=r)
        self.out_of_order = Counter("kafka_canary_records_out_of_order", "Received after a later sequence number",
                                    PBL, registry=r)
        self.foreign_records = Counter("kafka_canary_foreign_records", "Records of other probes on the topic",
                                       ("partition",), registry=r)
        self.availability = Gauge("kafka_canary_availability",
                                  "Acknowledged / (acknowledged + produce errors) over the status window",
                                  ("partition", "lane"), registry=r)
        self.lane_availability = Gauge("kafka_canary_lane_availability", "Availability per lane over the window",
                                       ("lane",), registry=r)
        self.connection_success = Gauge("kafka_canary_connection_success", "1 when the last connection check "
                                        "to the broker succeeded", ("broker", "lane"), registry=r)
        self.connection_latency = Histogram("kafka_canary_connection_latency", "Connection check time",
                                            ("broker", "lane"), unit="seconds", buckets=LATENCY_BUCKETS, registry=r)
        self.connection_errors = Counter("kafka_canary_connection_error", "Failed connection checks",
                                         ("broker", "lane"), registry=r)
        self.ready = Gauge("kafka_canary_ready", "1 once the topic is reconciled and a round trip succeeded",
                           registry=r)
        self._children: dict[tuple, object] = {}

    def _child(self, metric, *labels):
        key = (id(metric), *labels)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*labels)
        return child

    # ProbeEvents, called by the tracker for every message

    def sent(self, partition: int, leader: int | None, lane: str) -> None:
        self._child(self.produced, str(partition), _broker(leader), lane).inc()

    def acked(self, partition: int, leader: int | None, lane: str, latency_ms: float) -> None:
        labels = (str(partition), _broker(leader), lane)
        self._child(self.acked_counter, *labels).inc()
        self._child(self.produce_latency, *labels).observe(latency_ms / 1000)

    def produce_error(self, partition: int, leader: int | None, lane: str) -> None:
        self._child(self.produce_errors, str(partition), _broker(leader), lane).inc()

    def received(self, partition: int, leader: int | None, lane: str, latency_ms: float) -> None:
        labels = (str(partition), _broker(leader), lane)
        self._child(self.consumed, *labels).inc()
        self._child(self.e2e_latency, *labels).observe(latency_ms / 1000)

    def outcome(self, partition: int, leader: int | None, lane: str, outcome: str) -> None:
        metric = {"lost": self.lost, "duplicate": self.duplicated, "out_of_order": self.out_of_order}.get(outcome)
        if metric is not None:
            self._child(metric, str(partition), _broker(leader), lane).inc()

    def consume_error(self, partition: int | None) -> None:
        self._child(self.consume_errors, "none" if partition is None else str(partition)).inc()

    def foreign(self, partition: int) -> None:
        self._child(self.foreign_records, str(partition)).inc()

    # periodic

    def connection(self, broker: int, lane: str, ok: bool, latency_ms: float | None) -> None:
        self._child(self.connection_success, str(broker), lane).set(1 if ok else 0)
        if ok and latency_ms is not None:
            self._child(self.connection_latency, str(broker), lane).observe(latency_ms / 1000)
        if not ok:
            self._child(self.connection_errors, str(broker), lane).inc()
