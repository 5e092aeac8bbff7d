"""The broker metric catalogue and the exporter source's arithmetic (rates from two readings, restarts)."""

from __future__ import annotations

from canary.broker_metrics.catalogue import CATALOGUE, BrokerMetric
from canary.broker_metrics.sources import ExporterSource, parse_exposition

TEXT = """# TYPE kafka_server_brokertopicmetrics_count untyped
kafka_server_brokertopicmetrics_count{name="BytesInPerSec"} %s
kafka_server_brokertopicmetrics_count{name="BytesOutPerSec"} 7.0
# TYPE kafka_network_socketserver_value untyped
kafka_network_socketserver_value{name="NetworkProcessorAvgIdlePercent"} 0.75
# TYPE jvm_gc_collection_seconds summary
jvm_gc_collection_seconds_count{gc="Copy"} 3.0
jvm_gc_collection_seconds_sum{gc="Copy"} %s
jvm_gc_collection_seconds_count{gc="MarkSweepCompact"} 1.0
jvm_gc_collection_seconds_sum{gc="MarkSweepCompact"} 0.5
"""
BY_NAME = {m.name: m for m in CATALOGUE}


def test_names_are_unique_and_cover_what_a_capacity_cut_moves():
    assert len(BY_NAME) == len(CATALOGUE)
    for name in ("request_handler_idle_ratio", "network_processor_idle_ratio", "produce_total_time_p99_ms",
                 "fetch_consumer_queue_time_p50_ms", "bytes_in_per_s", "bytes_out_per_s", "log_flushes_per_s",
                 "log_flush_time_p99_ms", "isr_shrinks_per_s", "under_replicated_partitions", "cpu_seconds_per_s",
                 "gc_seconds_per_s", "failed_produce_requests_per_s"):
        assert name in BY_NAME, name
    assert BY_NAME["request_handler_idle_ratio"].direction == "decrease"
    assert BY_NAME["produce_total_time_p99_ms"].direction == "increase"


def test_a_gauge_is_read_and_a_rate_needs_two_readings_summed_over_matching_series():
    first = parse_exposition(TEXT % ("1000.0", "1.5"))
    second = parse_exposition(TEXT % ("3000.0", "2.0"))
    idle, bytes_in, gc = BY_NAME["network_processor_idle_ratio"], BY_NAME["bytes_in_per_s"], BY_NAME["gc_seconds_per_s"]
    assert ExporterSource._reading(idle, first, None, 10.0) == 0.75
    assert ExporterSource._reading(bytes_in, first, None, 10.0) is None
    assert ExporterSource._reading(bytes_in, second, (10.0, first), 12.0) == 1000.0  # 2000 bytes in 2 s
    assert ExporterSource._reading(gc, second, (10.0, first), 12.0) == 0.25  # both collectors: 2.0 -> 2.5
    # a counter that went down: the broker restarted between the readings, so no rate
    assert ExporterSource._reading(bytes_in, first, (10.0, second), 12.0) is None
    assert ExporterSource._reading(BY_NAME["isr_shrinks_per_s"], second, (10.0, first), 12.0) is None  # absent


def test_the_promql_of_a_metric_names_the_brokers_and_scales():
    handler = BY_NAME["request_handler_idle_ratio"]
    assert handler.promql("broker", "1|2", "30s") == (
        'sum by (broker) (rate(kafka_server_kafkarequesthandlerpool_count{name="RequestHandlerAvgIdlePercent",'
        'broker=~"1|2"}[30s])) * 1e-09')
    gauge = BrokerMetric("x", "s", "gauge", "ms", "increase", {"a": "b"})
    assert gauge.promql("pod", "k-0", "1m") == 'sum by (pod) (s{a="b",pod=~"k-0"})'


LOCAL = """kafka_network_requestmetrics_mean{name="LocalTimeMs",request="Produce"} %s
kafka_network_requestmetrics_count{name="LocalTimeMs",request="Produce"} %s
"""


def test_a_mean_is_the_histograms_mean_over_the_interval_not_its_lifetime():
    """100 requests at 1 ms, then 50 more averaging 2.5 ms: the lifetime mean reads 1.5, the interval's is 2.5."""
    local = BY_NAME["produce_local_time_mean_ms"]
    first, second = parse_exposition(LOCAL % (1.0, 100)), parse_exposition(LOCAL % (1.5, 150))
    assert ExporterSource._reading(local, first, None, 10.0) is None
    assert ExporterSource._reading(local, second, (10.0, first), 12.0) == 2.5
    assert ExporterSource._reading(local, first, (10.0, first), 12.0) is None     # no request in between
    assert ExporterSource._reading(local, first, (10.0, second), 12.0) is None    # restarted: the count went down


def test_the_promql_of_a_mean_divides_the_sums_change_by_the_counts():
    query = BY_NAME["produce_local_time_mean_ms"].promql("broker", "1", "30s")
    m = 'kafka_network_requestmetrics_mean{name="LocalTimeMs",request="Produce",broker=~"1"}'
    c = 'kafka_network_requestmetrics_count{name="LocalTimeMs",request="Produce",broker=~"1"}'
    assert query == (f"(sum by (broker) ({m} * {c}) - sum by (broker) ({m} offset 30s * {c} offset 30s)) / "
                     f"(sum by (broker) ({c}) - sum by (broker) ({c} offset 30s) > 0)")
