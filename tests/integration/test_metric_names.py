"""The probe's and the lane clients' Prometheus metrics pass Prometheus's own linter (`promtool check metrics`,
Debian's prometheus package, installed by `make test`): base units, `_total` counters, no abbreviated units. The
probe's recording and alerting rules pass `promtool test rules` on crafted series."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import generate_latest
from prometheus_client.openmetrics.exposition import generate_latest as openmetrics

from canary.clients.metrics import ClientMetrics
from canary.probe.metrics import ProbeMetrics

pytestmark = [pytest.mark.integration, pytest.mark.parallel]
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


RULES = Path(__file__).resolve().parents[2] / "plugins" / "kafka_canary_provider" / "prometheus" / \
    "kafka-canary.rules.yml"
RULE_TESTS = Path(__file__).resolve().parents[1] / "prometheus" / "kafka-canary.rules.test.yml"


def _rule_tests(promtool: str, tests: Path) -> subprocess.CompletedProcess:
    return subprocess.run([promtool, "test", "rules", tests.name], cwd=tests.parent, capture_output=True, timeout=60)


def test_the_probes_alert_rules_fire_on_the_harm_they_are_for_and_only_then(promtool):
    """The provider's rules (plugins/kafka_canary_provider/prometheus): valid, their unit tests pass (availability
    per lane, e2e p99 per broker, lost records, a stalled probe, a probe down), and every probe metric they read is
    one the probe exports."""
    checked = subprocess.run([promtool, "check", "rules", str(RULES)], capture_output=True, timeout=60)
    assert checked.returncode == 0, (checked.stdout + checked.stderr).decode()
    tested = _rule_tests(promtool, RULE_TESTS)
    assert tested.returncode == 0 and b"SUCCESS" in tested.stdout, (tested.stdout + tested.stderr).decode()
    exported = {line.split("{")[0].split(" ")[0] for line in generate_latest(_probe_registry()).decode().splitlines()
                if line and not line.startswith("#")}
    read = set(re.findall(r"\bkafka_canary_[a-z_]+\b", RULES.read_text()))
    assert read and read <= exported, sorted(read - exported)


def test_the_rule_tests_can_fail(promtool, tmp_path):
    """The same tests against rules that alert on 97 % availability instead of 99 %: the canary lane at 98 % no
    longer alerts, and the test says so."""
    (tmp_path / "plugins" / "kafka_canary_provider" / "prometheus").mkdir(parents=True)
    (tmp_path / "tests" / "prometheus").mkdir(parents=True)
    (tmp_path / "plugins" / "kafka_canary_provider" / "prometheus" / RULES.name).write_text(
        RULES.read_text().replace("ratio_rate5m < 0.99", "ratio_rate5m < 0.97"))
    tests = tmp_path / "tests" / "prometheus" / RULE_TESTS.name
    tests.write_text(RULE_TESTS.read_text())
    failed = _rule_tests(promtool, tests)
    assert failed.returncode != 0 and b"KafkaCanaryLaneAvailabilityLow" in failed.stdout + failed.stderr, \
        (failed.stdout + failed.stderr).decode()
