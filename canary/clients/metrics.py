"""Prometheus metrics of the lane-aware clients, labelled by client id, topic and the client's lane.

`ClientMetrics.default()` registers once in prometheus_client's global registry, so a service that already
exposes `/metrics` (prometheus_client.start_http_server) shows them with no extra wiring; tests and processes that
want them apart pass `ClientMetrics(CollectorRegistry())`. Several clients share one ClientMetrics (the `client`
label tells them apart)."""

from __future__ import annotations

import threading

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram

from canary.probe.metrics import LATENCY_BUCKETS

CTL = ("client", "topic", "lane")
CTPL = ("client", "topic", "partition", "lane")
FALLBACK = "kafka_canary_client_lane_fallback"


class ClientMetrics:
    _default: ClientMetrics | None = None
    _default_lock = threading.Lock()

    def __init__(self, registry: CollectorRegistry | None = None):
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.fallback = Gauge(FALLBACK, "1 while a producer finds no partition of its lane and sends to all "
                              "partitions (availability first)", CTL, registry=r)
        self.fallback_records = Counter("kafka_canary_client_lane_fallback_records",
                                        "Records sent outside the producer's lane (fallback)", CTL, registry=r)
        self.produced = Counter("kafka_canary_client_records_produced", "Records sent", CTPL, registry=r)
        self.produce_errors = Counter("kafka_canary_client_produce_error", "Records not acknowledged", CTPL,
                                      registry=r)
        self.produce_latency = Histogram("kafka_canary_client_produce_latency", "Send to acknowledgement", CTL,
                                         unit="seconds", buckets=LATENCY_BUCKETS, registry=r)
        self.consumed = Counter("kafka_canary_client_records_consumed", "Records received", CTPL, registry=r)
        self.consume_errors = Counter("kafka_canary_client_consume_error", "Fetch errors", ("client", "lane"),
                                      registry=r)
        self.processing_errors = Counter("kafka_canary_client_processing_error", "Records whose processing failed",
                                         CTL, registry=r)
        self.processing_latency = Histogram("kafka_canary_client_processing_latency", "Processing time", CTL,
                                            unit="seconds", buckets=LATENCY_BUCKETS, registry=r)
        self.lag = Gauge("kafka_canary_client_lag", "Records behind the partition's end at the last receipt", CTPL,
                         registry=r)
        self.assigned = Gauge("kafka_canary_client_assigned_partitions", "Partitions a consumer reads", CTL,
                              registry=r)
        self._children: dict[tuple, object] = {}

    def child(self, metric, *labels: str):
        """metric.labels(*labels), cached: the clients call this for every record."""
        key = (id(metric), *labels)
        found = self._children.get(key)
        if found is None:
            found = self._children[key] = metric.labels(*labels)
        return found

    @classmethod
    def default(cls) -> ClientMetrics:
        """The process-wide instance, in prometheus_client's global registry."""
        with cls._default_lock:
            if cls._default is None:
                cls._default = cls(REGISTRY)
            return cls._default
