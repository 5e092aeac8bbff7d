"""The probe's and the lane clients' Prometheus metrics pass Prometheus's own linter (`promtool check metrics`,
Debian's prometheus package, installed by `make test`): base units, `_total` counters, no abbreviated units."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import generate_latest
from prometheus_client.openmetrics.exposition import generate_latest as openmetrics

from canary.clients.metrics import ClientMetrics
from canary.probe.metrics import ProbeMetrics

pytestmark = pytest.mark.integration
PROMTOOL = "/usr/bin/promtool"


def _probe_registry() -> CollectorRegistry:
    """Every probe metric family with a sample (a family with no child is not exposed, so not checked)."""
    m = ProbeMetrics()
    m.sent(0, 1, "canary")
    m.acked(0, 1, "canary", 3.25)
    m.received(0, 1, "canary", 4.5)
    m.produce_error(0, 1, "canary")
    for outcome in ("lost", "duplicate", "out_of_order"):
        m.outcome(0, 1, "canary", outcome)
    m.consume_error(None)
    m.foreign(0)
    m.connection(1, "canary", True, 0.8)
    m.connection(2, "baseline", False, None)
    m.availability.labels("0", "canary").set(1)
    m.lane_availability.labels("canary").set(1)
    m.ready.set(1)
    return m.registry


def _client_registry() -> CollectorRegistry:
    m = ClientMetrics(CollectorRegistry())
    ctl, ctpl = ("c-0", "orders", "canary"), ("c-0", "orders", "3", "canary")
    for metric in (m.fallback_records, m.processing_errors):
        m.child(metric, *ctl).inc()
    for metric in (m.produced, m.produce_errors, m.consumed):
        m.child(metric, *ctpl).inc()
    m.child(m.consume_errors, "c-0", "canary").inc()
    m.child(m.produce_latency, *ctl).observe(0.004)
    m.child(m.processing_latency, *ctl).observe(0.002)
    m.child(m.fallback, *ctl).set(0)
    m.child(m.lag, *ctpl).set(5)
    m.child(m.assigned, *ctl).set(2)
    return m.registry


def _lint(exposition: bytes) -> subprocess.CompletedProcess:
    return subprocess.run([PROMTOOL, "check", "metrics"], input=exposition, capture_output=True, timeout=60)


@pytest.fixture(scope="module")
def promtool() -> str:
    assert shutil.which(PROMTOOL), f"{PROMTOOL} is missing: `make test` installs Debian's prometheus package"
    return PROMTOOL


@pytest.mark.parametrize("registry", [_probe_registry, _client_registry], ids=["probe", "clients"])
def test_every_metric_passes_promtool(promtool, registry):
    text = generate_latest(registry())
    linted = _lint(text)
    assert linted.returncode == 0 and not linted.stdout + linted.stderr, (linted.stdout + linted.stderr).decode()
    # Unit metadata: the latency histograms say they are in seconds (OpenMetrics' # UNIT line).
    units = [line for line in openmetrics(registry()).decode().splitlines() if line.startswith("# UNIT")]
    assert units and all(line.endswith(" seconds") and "_latency_seconds " in line for line in units), units


def test_the_linter_refuses_what_it_should(promtool):
    """The check can fail: the names it refused before (milliseconds in the name) still fail it."""
    bad = b"# HELP kafka_canary_produce_latency_ms x\n# TYPE kafka_canary_produce_latency_ms gauge\n" \
          b"kafka_canary_produce_latency_ms 1\n"
    linted = _lint(bad)
    assert linted.returncode != 0 and b"abbreviated units" in linted.stdout + linted.stderr
