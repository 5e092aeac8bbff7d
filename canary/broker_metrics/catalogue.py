"""The broker metrics the gate compares, each defined once: which exporter series it comes from, whether it is a
gauge read as it is or a counter turned into a per-second rate, its unit, which change is bad, and the PromQL that
computes the same value in a Prometheus scraping the same exporter (a team whose Prometheus names series
differently overrides the queries)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Literal

Direction = Literal["increase", "decrease"]   # which change is a regression
# RE2's metacharacters (Prometheus's regex dialect); everything else, `-` and `:` among them, matches itself and
# must not be escaped: `\-` inside a PromQL string is an unknown escape sequence, and the query is refused.
_RE2_SPECIAL = frozenset("\\.+*?()|[]{}^$")


def promql_string(text: str) -> str:
    """`text` as the inside of a double-quoted PromQL string (Go's escapes: backslash, quote, line breaks)."""
    return (text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r")
            .replace("\t", "\\t"))


def label_regex(values: Iterable[str]) -> str:
    """The inside of a double-quoted PromQL string holding the regex that matches exactly `values` (Prometheus
    anchors a label regex): `kafka-1.example.com` -> `kafka-1\\\\.example\\\\.com`, which Prometheus reads as the
    regex `kafka-1\\.example\\.com`."""
    return promql_string("|".join("".join("\\" + c if c in _RE2_SPECIAL else c for c in v) for v in values))


@dataclass(frozen=True)
class BrokerMetric:
    """`series` filtered by `labels` (several matching series are summed); kind `gauge`: the value as read; `rate`:
    the counter's increase per second between two samples, times `scale` (idle nanoseconds per second -> ratio);
    `mean`: a histogram's mean over the interval between two samples, from its lifetime `_mean` series (`series`)
    and its `_count` (Kafka's request histograms keep whole milliseconds and their percentiles decay over minutes;
    the interval's mean of many requests resolves a fraction of a millisecond and follows the interval)."""

    name: str
    series: str
    kind: Literal["gauge", "rate", "mean"]
    unit: str
    direction: Direction
    labels: Mapping[str, str] = field(default_factory=dict)
    scale: float = 1.0

    def promql(self, broker_label: str, brokers: str, window: str) -> str:
        """The query giving this metric per broker: `brokers` is the regex of the broker label's values, escaped for
        a PromQL string (`label_regex`)."""
        matchers = ",".join([*(f'{k}="{promql_string(v)}"' for k, v in sorted(self.labels.items())),
                             f'{broker_label}=~"{brokers}"'])
        selector = f"{self.series}{{{matchers}}}"
        by = f"sum by ({broker_label})"
        if self.kind == "mean":  # (sum now - sum a window ago) / (count now - count then), sum = mean * count
            count = f"{self.counts().series}{{{matchers}}}"
            return (f"({by} ({selector} * {count}) - {by} ({selector} offset {window} * {count} offset {window})) / "
                    f"({by} ({count}) - {by} ({count} offset {window}) > 0)")
        inner = f"rate({selector}[{window}])" if self.kind == "rate" else selector
        query = f"{by} ({inner})"
        return query if self.scale == 1.0 else f"{query} * {self.scale:g}"

    def counts(self) -> BrokerMetric:
        """A `mean` metric's count series, with the same labels."""
        return replace(self, series=self.series.removesuffix("_mean") + "_count", kind="rate")


def _request_times() -> list[BrokerMetric]:
    """Queue, local, remote and total time of Produce and consumer and follower Fetch requests, p50 and p99."""
    metrics = []
    for request, short in (("Produce", "produce"), ("FetchConsumer", "fetch_consumer"),
                           ("FetchFollower", "fetch_follower")):
        for part, part_short in (("RequestQueueTimeMs", "queue"), ("LocalTimeMs", "local"),
                                 ("RemoteTimeMs", "remote"), ("TotalTimeMs", "total")):
            for quantile in (50, 99):
                metrics.append(BrokerMetric(
                    f"{short}_{part_short}_time_p{quantile}_ms", f"kafka_network_requestmetrics_{quantile}thpercentile",
                    "gauge", "ms", "increase", {"name": part, "request": request}))
    return metrics


def _topic_rate(name: str, bean: str, unit: str, direction: Direction) -> BrokerMetric:
    return BrokerMetric(name, "kafka_server_brokertopicmetrics_count", "rate", unit, direction, {"name": bean})


CATALOGUE: tuple[BrokerMetric, ...] = (
    # Kafka marks the handler pool's idle meter with idle nanoseconds per thread: its rate / 1e9 is the idle share.
    BrokerMetric("request_handler_idle_ratio", "kafka_server_kafkarequesthandlerpool_count", "rate", "ratio",
                 "decrease", {"name": "RequestHandlerAvgIdlePercent"}, scale=1e-9),
    BrokerMetric("network_processor_idle_ratio", "kafka_network_socketserver_value", "gauge", "ratio", "decrease",
                 {"name": "NetworkProcessorAvgIdlePercent"}),
    *_request_times(),
    BrokerMetric("produce_local_time_mean_ms", "kafka_network_requestmetrics_mean", "mean", "ms", "increase",
                 {"name": "LocalTimeMs", "request": "Produce"}),
    # The time a leader holds an acks=all produce request waiting for its followers: a slow follower shows here, on
    # the brokers it follows, not on itself; and the whole request's time, which a flood of requests queues too.
    BrokerMetric("produce_remote_time_mean_ms", "kafka_network_requestmetrics_mean", "mean", "ms", "increase",
                 {"name": "RemoteTimeMs", "request": "Produce"}),
    BrokerMetric("produce_total_time_mean_ms", "kafka_network_requestmetrics_mean", "mean", "ms", "increase",
                 {"name": "TotalTimeMs", "request": "Produce"}),
    _topic_rate("produce_requests_per_s", "TotalProduceRequestsPerSec", "1/s", "decrease"),
    _topic_rate("fetch_requests_per_s", "TotalFetchRequestsPerSec", "1/s", "decrease"),
    _topic_rate("failed_produce_requests_per_s", "FailedProduceRequestsPerSec", "1/s", "increase"),
    _topic_rate("failed_fetch_requests_per_s", "FailedFetchRequestsPerSec", "1/s", "increase"),
    _topic_rate("bytes_in_per_s", "BytesInPerSec", "bytes/s", "decrease"),
    _topic_rate("bytes_out_per_s", "BytesOutPerSec", "bytes/s", "decrease"),
    _topic_rate("messages_in_per_s", "MessagesInPerSec", "1/s", "decrease"),
    BrokerMetric("log_flushes_per_s", "kafka_log_logflushstats_count", "rate", "1/s", "increase",
                 {"name": "LogFlushRateAndTimeMs"}),
    BrokerMetric("log_flush_time_p99_ms", "kafka_log_logflushstats_99thpercentile", "gauge", "ms", "increase",
                 {"name": "LogFlushRateAndTimeMs"}),
    BrokerMetric("isr_shrinks_per_s", "kafka_server_replicamanager_count", "rate", "1/s", "increase",
                 {"name": "IsrShrinksPerSec"}),
    BrokerMetric("isr_expands_per_s", "kafka_server_replicamanager_count", "rate", "1/s", "increase",
                 {"name": "IsrExpandsPerSec"}),
    BrokerMetric("under_replicated_partitions", "kafka_server_replicamanager_value", "gauge", "partitions",
                 "increase", {"name": "UnderReplicatedPartitions"}),
    BrokerMetric("cpu_seconds_per_s", "process_cpu_seconds_total", "rate", "s/s", "increase"),
    BrokerMetric("gc_seconds_per_s", "jvm_gc_collection_seconds_sum", "rate", "s/s", "increase"),
)


@dataclass(frozen=True)
class Work:
    """How much a broker did at one reading: the sum of catalogue rates `metrics`, in units of `scale` (a metric
    judged per work is its value divided by that sum). Below `floor` (in those units) a broker did too little for
    the ratio to mean anything: a fixed cost (the JVM, the controller's heartbeats) divided by almost nothing."""

    name: str
    metrics: tuple[str, ...]
    scale: float
    unit: str
    floor: float

    def of(self, values: Mapping[str, float]) -> float | None:
        """The work in `values` (one broker's readings by metric name), or None when one is missing."""
        if any(m not in values for m in self.metrics):
            return None
        return sum(values[m] for m in self.metrics) / self.scale


# Client requests (produce and fetch, followers' fetches included: serving them is work too) and client bytes.
WORK: Mapping[str, Work] = {
    "requests": Work("requests", ("produce_requests_per_s", "fetch_requests_per_s"), 1000.0, "1000 requests/s", 0.01),
    "bytes": Work("bytes", ("bytes_in_per_s", "bytes_out_per_s"), 1e6, "MB/s", 0.01),
}


# Idle shares whose complement, the busy share, is what capacity scales with: a pool twice as busy under the same load
# has half the headroom. The judge compares these as busy shares (1 - idle).
IDLE_SHARES: frozenset[str] = frozenset({"request_handler_idle_ratio", "network_processor_idle_ratio"})


@dataclass(frozen=True)
class LoadMetric:
    """A per-broker value the window's load measures itself (canary.probe.load), not read from the broker, per
    reading interval through the partition that broker leads: `source` produce, its records' acknowledgement
    latency; consume, the time from a record's creation to its consumer receiving it (a broker that serves fetches
    slowly, with small socket buffers or a slow fetch path, leaves its partition's consumer ever further behind);
    catch_up, how fast the broker delivers the partition's latest records to a consumer that is behind, once it
    started (a consumer reading a backlog, as Kafka's ConsumerPerformance does: a broker that caps its fetch
    responses keeps up with a consumer at the head of the log and hands a backlog over response by response)."""

    name: str
    unit: str
    direction: Direction
    quantile: float | None       # of the interval's latencies; None for catch_up
    source: Literal["produce", "consume", "catch_up"] = "produce"


LOAD_METRICS: tuple[LoadMetric, ...] = (
    LoadMetric("load_produce_latency_p50_ms", "ms", "increase", 0.50),
    LoadMetric("load_produce_latency_p99_ms", "ms", "increase", 0.99),
    LoadMetric("load_consume_latency_p50_ms", "ms", "increase", 0.50, "consume"),
    LoadMetric("load_consume_latency_p99_ms", "ms", "increase", 0.99, "consume"),
    LoadMetric("load_catch_up_bytes_per_s", "bytes/s", "decrease", None, "catch_up"),
)
# How fast a broker delivers the latest records of user-topic partitions it leads to a consumer that is behind, read
# back a bounded volume at a time without any load (canary.probe.user_reads).
# How much of its logs a starting broker still has to recover (KIP-831; gauges that exist only while it recovers,
# summed over its log directories and recovery threads): what a slow start is doing, so a restart is waited for
# while they go down (canary.rollout.broker.rolling). Not judged, not in CATALOGUE.
RECOVERY: tuple[BrokerMetric, ...] = (
    BrokerMetric("logs_to_recover", "kafka_log_logmanager_value", "gauge", "logs", "increase",
                 {"name": "remainingLogsToRecover"}),
    BrokerMetric("segments_to_recover", "kafka_log_logmanager_value", "gauge", "segments", "increase",
                 {"name": "remainingSegmentsToRecover"}),
)

# When a broker's JVM started (the agent's process collector): proof that a roll restarted the broker, which a control
# broker's roll, changing nothing, gives no other sign of (canary.rollout.broker.rolling). Not judged, not in CATALOGUE.
PROCESS_START = BrokerMetric("process_start_time_s", "process_start_time_seconds", "gauge", "s", "increase")

USER_CATCH_UP = "catch_up_bytes_per_s"
# Every per-broker metric the judge can compare, with its unit.
UNITS: Mapping[str, str] = {**{m.name: m.unit for m in CATALOGUE}, **{m.name: m.unit for m in LOAD_METRICS},
                            USER_CATCH_UP: "bytes/s"}
