"""The PromQL sent to Prometheus (label values escaped for a regex inside a double-quoted PromQL string) and what
an answer of the wrong shape becomes: a BrokerMetricsError naming the problem, never a crash."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from canary.broker_metrics import CATALOGUE, BrokerMetricsError, ExporterSource, PrometheusSource
from canary.broker_metrics.catalogue import label_regex, promql_string

GAUGE = next(m for m in CATALOGUE if m.kind == "gauge")


@pytest.mark.parametrize(("values", "inside"), [
    (["kafka-0", "kafka-1"], "kafka-0|kafka-1"),  # docs/broker-rollout.md: `-` is no regex metacharacter
    (["kafka-1:7071", "kafka-2:7071"], "kafka-1:7071|kafka-2:7071"),  # docs/deployers.md, broker_label instance
    (["kafka-1.example.com"], "kafka-1\\\\.example\\\\.com"),  # a dot: `\.` in the regex, `\\.` in the string
    (["a+b(c)", "x|y"], "a\\\\+b\\\\(c\\\\)|x\\\\|y"),
    (['say "hi"\\'], 'say \\"hi\\"\\\\\\\\'),  # a quote escaped for the string; a backslash twice over
])
def test_label_values_are_escaped_for_a_regex_inside_a_promql_string(values, inside):
    assert label_regex(values) == inside


def test_the_query_holds_the_docs_label_values_as_prometheus_reads_them():
    source = PrometheusSource("http://127.0.0.1:1", {1: "kafka-0", 2: "kafka-1.example.com"}, broker_label="pod")
    assert source.query_of(GAUGE) == (f'sum by (pod) ({GAUGE.series}{{'
                                      + "".join(f'{k}="{promql_string(v)}",' for k, v in sorted(GAUGE.labels.items()))
                                      + 'pod=~"kafka-0|kafka-1\\\\.example\\\\.com"})')
    assert "\\-" not in source.query_of(GAUGE)


def test_a_source_narrowed_to_some_brokers_reads_those_alone():
    prometheus = PrometheusSource("http://127.0.0.1:1", {1: "kafka-0", 2: "kafka-1", 3: "kafka-2"}, broker_label="pod")
    assert prometheus.only([GAUGE], [2]).query_of(GAUGE).endswith('pod=~"kafka-1"})')
    assert prometheus.only([GAUGE]).brokers == prometheus.brokers  # no list: all of them
    agents = ExporterSource({1: "http://127.0.0.1:1", 2: "http://127.0.0.1:2"})
    assert agents.only([GAUGE], iter([2, 7])).endpoints == {2: "http://127.0.0.1:2"}


@pytest.fixture
def prometheus_answering() -> Iterator:
    """A stand-in Prometheus on loopback that answers every query with the body it is given."""
    servers = []

    def serve(body: str, content_type: str = "application/json") -> str:
        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                data = body.encode()
                self.send_response(200)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}"

    yield serve
    for server in servers:
        server.shutdown()


@pytest.mark.parametrize(("body", "named"), [
    ("[]", "answered the query with a JSON list, not the object of Prometheus's HTTP API"),
    (json.dumps({"status": "success"}), "without data.result (a list of series)"),
    (json.dumps({"status": "success", "data": {"resultType": "vector", "result": {"a": 1}}}),
     "without data.result (a list of series)"),
    (json.dumps({"status": "success", "data": {"result": [{"metric": {"broker": "kafka-1"},
                                                            "value": [1700000000, "lots"]}]}}),
     "with a value that is not a [time, number] pair for broker 1: \"[1700000000, 'lots']\""),
    (json.dumps({"status": "success", "data": {"result": [{"metric": {"broker": "kafka-1"}, "value": 3}]}}),
     "with a value that is not a [time, number] pair for broker 1"),
])
def test_an_answer_of_the_wrong_shape_is_named(prometheus_answering, body, named):
    source = PrometheusSource(prometheus_answering(body), {1: "kafka-1"}, metrics=[GAUGE], timeout=5)
    with pytest.raises(BrokerMetricsError) as refused:
        source.sample()
    assert named in str(refused.value)


def test_a_good_answer_is_read(prometheus_answering):
    body = json.dumps({"status": "success", "data": {"result": [
        {"metric": {"broker": "kafka-1"}, "value": [1700000000.5, "3"]},
        {"metric": {"broker": "someone-else"}, "value": [1700000000.5, "9"]}]}})
    samples = PrometheusSource(prometheus_answering(body), {1: "kafka-1"}, metrics=[GAUGE], timeout=5).sample()
    assert [(s.broker, s.metric, s.value, s.ts_ms) for s in samples] == [(1, GAUGE.name, 3.0, 1700000000500)]
