"""Broker metrics from both sources on real brokers: the JMX exporter agent of each broker we start, and a real
Prometheus server (Debian's, started on loopback) scraping those agents, read through its HTTP query API."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from conftest import running_cluster
from waiting import wait_until

from canary.broker_metrics import CATALOGUE, LOAD_METRICS, BrokerMetricsError, ExporterSource, PrometheusSource
from canary.observations import BrokerReading
from canary.probe.load import Load, LoadConfig
from canary.process import free_port

pytestmark = pytest.mark.integration
PROMETHEUS = "/usr/bin/prometheus"


def _load(bootstrap: str, messages: int = 3000) -> None:
    """Produce requests to both brokers: a topic with a partition on each (a request mean needs requests)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept referenced until the answer: a freed one aborts
    created = admin.create_topics([NewTopic("metrics-load", 2, 2)])
    try:
        created["metrics-load"].result(30)
    except Exception as exc:  # created by an earlier test of this module
        assert "TOPIC_ALREADY_EXISTS" in str(exc), exc
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for i in range(messages):
        producer.produce("metrics-load", value=b"x" * 500, key=str(i).encode())
        producer.poll(0)
    assert producer.flush(30) == 0


@pytest.fixture(scope="module")
def cluster() -> Iterator:
    with running_cluster("broker-metrics", brokers=2) as started:
        yield started


def test_every_broker_serves_every_catalogue_metric_and_load_shows(cluster):
    source = ExporterSource(cluster.metrics_endpoints())
    assert sorted(source.endpoints) == [1, 2]
    source.check()
    first = source.sample()
    assert {s.metric for s in first} == {m.name for m in CATALOGUE if m.kind == "gauge"}  # rates need two readings
    started = time.monotonic()
    _load(cluster.bootstrap_servers)
    # Readings a few seconds apart, as a rollout takes them: Kafka marks a handler's idle time when its wait ends
    # (every 300 ms at the latest), so over a load that took a fraction of a second the idle count may not move.
    time.sleep(max(0.0, 2.0 - (time.monotonic() - started)))
    second = source.sample()
    assert {(s.broker, s.metric) for s in second} == {(b, m.name) for b in (1, 2) for m in CATALOGUE}
    value = {(s.broker, s.metric): s.value for s in second}
    assert sum(value[(b, "bytes_in_per_s")] for b in (1, 2)) > 0
    assert sum(value[(b, "messages_in_per_s")] for b in (1, 2)) > 0
    assert all(0 < value[(b, "request_handler_idle_ratio")] <= 1 for b in (1, 2))
    assert all(value[(b, "cpu_seconds_per_s")] > 0 for b in (1, 2))


def test_a_broker_whose_metrics_cannot_be_read_is_named(cluster):
    endpoints = {**cluster.metrics_endpoints(), 9: f"http://127.0.0.1:{free_port()}"}
    with pytest.raises(BrokerMetricsError, match=r"broker 9: cannot read its metrics at http://127\.0\.0\.1:\d+"):
        ExporterSource(endpoints).check()
    assert {s.broker for s in ExporterSource(endpoints).sample()} == {1, 2}  # the others still sampled


@pytest.fixture(scope="module")
def prometheus(cluster, tmp_path_factory) -> Iterator[str]:
    """Debian's Prometheus on loopback scraping both brokers' agents every second, each target labelled broker (the
    id) and pod (kafka-<id>, the docs' label style)."""
    assert shutil.which(PROMETHEUS), f"{PROMETHEUS} is missing: `make test` installs Debian's prometheus package"
    home = tmp_path_factory.mktemp("prometheus")
    targets = "\n".join(f"      - targets: ['{url.removeprefix('http://')}']\n"
                        f"        labels: {{broker: '{broker}', pod: 'kafka-{broker}'}}"
                        for broker, url in sorted(cluster.metrics_endpoints().items()))
    (home / "prometheus.yml").write_text(f"global: {{scrape_interval: 1s}}\nscrape_configs:\n  - job_name: kafka\n"
                                         f"    static_configs:\n{targets}\n")
    port = free_port()
    with open(home / "prometheus.log", "w") as log:
        server = subprocess.Popen([PROMETHEUS, f"--config.file={home / 'prometheus.yml'}",
                                   f"--storage.tsdb.path={home / 'data'}", f"--web.listen-address=127.0.0.1:{port}"],
                                  stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        _until_scraped(url, home / "prometheus.log")
        yield url
    finally:
        server.terminate()
        server.wait(30)


def _until_scraped(url: str, log: Path, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            up = requests.get(f"{url}/api/v1/query", params={"query": "count_over_time(up[1m])"}, timeout=2).json()
            if len(up["data"]["result"]) == 2 and all(float(r["value"][1]) >= 12 for r in up["data"]["result"]):
                return
        except (requests.RequestException, ValueError, KeyError):
            pass
        time.sleep(0.5)
    raise AssertionError(f"Prometheus did not scrape both brokers within {timeout:.0f}s: {log.read_text()[-2000:]}")


def test_prometheus_gives_the_same_metrics_per_broker(cluster, prometheus):
    _load(cluster.bootstrap_servers)
    time.sleep(3)  # two scrapes after the load
    source = PrometheusSource(prometheus, {1: "1", 2: "2"}, window="10s")
    source.check()
    samples = source.sample()
    assert {(s.broker, s.metric) for s in samples} == {(b, m.name) for b in (1, 2) for m in CATALOGUE}
    value = {(s.broker, s.metric): s.value for s in samples}
    assert sum(value[(b, "bytes_in_per_s")] for b in (1, 2)) > 0
    assert all(value[(b, "under_replicated_partitions")] == 0 for b in (1, 2))


def test_the_docs_label_values_match_their_brokers(cluster, prometheus):
    """Label values as the docs write them: `kafka-1` (a `-`, which must not be escaped) and `instance`'s
    host:port (dots, which must be): every broker found, the check passes."""
    pods = PrometheusSource(prometheus, {1: "kafka-1", 2: "kafka-2"}, broker_label="pod", window="10s")
    pods.check()
    assert {s.broker for s in pods.sample()} == {1, 2}
    instances = {b: url.removeprefix("http://") for b, url in cluster.metrics_endpoints().items()}
    PrometheusSource(prometheus, instances, broker_label="instance", window="10s").check()


def test_prometheus_problems_are_named(prometheus):
    with pytest.raises(BrokerMetricsError, match=r"no metrics for brokers \[3\]"):
        PrometheusSource(prometheus, {1: "1", 3: "3"}).check()
    with pytest.raises(BrokerMetricsError, match="refused the query"):
        PrometheusSource(prometheus, {1: "1"}, queries={"cpu_seconds_per_s": "rate(("}).sample()
    with pytest.raises(BrokerMetricsError, match="cannot reach Prometheus"):
        PrometheusSource(f"http://127.0.0.1:{free_port()}", {1: "1"}).check()


def test_the_cluster_metrics_command_shows_every_broker(cluster):
    shown = subprocess.run([sys.executable, "-m", "canary.cli", "cluster", "metrics", "--dir", str(cluster.directory),
                            "--interval", "1"], capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert "broker 1" in lines[0] and "broker 2" in lines[0]
    assert {line.split()[0] for line in lines[1:]} == {m.name for m in CATALOGUE}
    cpu = next(line for line in lines if line.startswith("cpu_seconds_per_s")).split()
    assert len(cpu) == 4 and all(float(v) > 0 for v in cpu[2:])  # a rate for each broker


def test_the_load_reads_its_produce_and_consume_latency_through_each_broker(cluster):
    """The window's load reports, every interval and for the partition each broker leads, its produce latency, the
    time its records take to reach its consumer and how fast a consumer behind reads them back: both lanes'
    brokers, every load metric, plausible values."""
    readings: list[BrokerReading] = []
    load = Load(LoadConfig(cluster.bootstrap_servers, 300, 1000, interval=1.0, run_id="load-readings"),
                emit=readings.append)
    load.start()
    try:
        wait_until(lambda: {(r.broker, r.metric) for r in readings} >= {(b, m.name) for b in (1, 2)
                                                                        for m in LOAD_METRICS}, 60,
                   "every load metric read for both brokers")
    finally:
        summary = load.stop()
    assert summary["lanes"]["baseline"]["acked"] > 0 and summary["lanes"]["baseline"]["consumed_mb_per_s"] > 0
    value = {(r.broker, r.metric): r.value for r in readings}
    for broker in (1, 2):
        # A record reaches the consumer after its acknowledgement's replication, so never much sooner than acked.
        assert 0 < value[(broker, "load_produce_latency_p50_ms")] <= value[(broker, "load_produce_latency_p99_ms")]
        assert 0 < value[(broker, "load_consume_latency_p50_ms")] <= value[(broker, "load_consume_latency_p99_ms")]
        assert value[(broker, "load_consume_latency_p99_ms")] < 10_000
        # Reading a backlog is far faster than the 300 kB/s the partition takes in: it reads from behind.
        assert value[(broker, "load_catch_up_bytes_per_s")] > 3 * 300 * 1000
    assert summary["lanes"]["baseline"]["catch_up_mb_per_s"] > 0.9
