"""A metric's result: a frozen model whose decision changes only with its reason, written to verdict.json as the
same plain dict as ever (schema `kafka-canary/verdict` version 1)."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from canary.judge import Aggregates, Decision, MetricResult, failed_metrics, judge
from canary.judge import histogram as H
from canary.judge.config import DEFAULT_METRICS

BUCKET = 10_000
P99 = next(m for m in DEFAULT_METRICS if m.name == "e2e_latency_p99")
LOSS = next(m for m in DEFAULT_METRICS if m.name == "loss_rate")
# verdict.json's metrics[] entry, in the order it has always been written (canary/judge/README.md)
WRITTEN = ["name", "kind", "direction", "critical", "must_have_data", "weight", "decision", "reason", "canary",
           "baseline", "effect", "test", "slo", "tolerance"]


def rows(lane: str, per_bucket: int, tail_ms: float, buckets: int = 30) -> list[tuple]:
    out: list[tuple] = []
    for b in range(buckets):
        t = b * BUCKET
        out += [(lane, t, "outcome.delivered", 0, per_bucket), (lane, t, "partition", 0, per_bucket),
                (lane, t, "e2e_latency_ms", H.bin_of(5.0), per_bucket - per_bucket // 10),
                (lane, t, "e2e_latency_ms", H.bin_of(tail_ms), per_bucket // 10),
                (lane, t, "produce_latency_ms", H.bin_of(2.0), per_bucket)]
    return out


def written(verdict: dict, name: str) -> dict:
    return next(m for m in verdict["metrics"] if m["name"] == name)


def test_the_decisions_are_the_words_verdict_json_has_always_had():
    assert [d.value for d in Decision] == ["PASS", "FAIL", "NO_DATA", "INSUFFICIENT_DATA"]


def test_a_result_is_frozen_and_a_decision_changes_only_in_a_copy_with_its_reason():
    result = MetricResult.of(P99, 0.001)
    with pytest.raises(ValidationError):
        result.decision = Decision.FAIL  # type: ignore[misc]
    failed = result.decided(Decision.FAIL, "canary p99 20 ms vs baseline 10 ms")
    assert (failed.decision, failed.reason) == (Decision.FAIL, "canary p99 20 ms vs baseline 10 ms")
    assert (result.decision, result.reason) == (Decision.NO_DATA, "")
    assert failed.passed_or_failed and not result.passed_or_failed


def test_the_written_entry_is_a_plain_dict_in_the_schemas_order():
    entry = MetricResult.of(LOSS, 0.002).model_copy(update={"insufficient": "3 observations"}).to_dict()
    assert list(entry) == WRITTEN  # no calibration (not a compared quantile), no note of the decision's making
    assert type(entry["decision"]) is str and entry["decision"] == "NO_DATA"
    assert entry["test"] == {"e_value": None, "threshold": 500.0, "alpha": 0.002}


def test_a_compared_quantile_writes_its_calibration_even_when_there_is_none():
    entry = MetricResult.of(P99, 0.001).model_copy(update={"calibration": None}).to_dict()
    assert list(entry) == [*WRITTEN, "calibration"] and entry["calibration"] is None


def test_the_judges_verdict_keeps_plain_json_and_readers_compare_with_decision():
    verdict = judge(Aggregates.from_rows(rows("canary", 100, 40.0) + rows("baseline", 200, 10.0), BUCKET, ["r"]))
    p99, loss = written(verdict, "e2e_latency_p99"), written(verdict, "loss_rate")
    assert p99["decision"] == Decision.FAIL and type(p99["decision"]) is str
    assert list(p99) == [*WRITTEN, "calibration"] and p99["calibration"] is None
    assert list(p99["test"])[:3] == ["e_value", "threshold", "alpha"] and p99["test"]["significant"] is True
    assert loss["decision"] == Decision.PASS and list(loss) == WRITTEN
    assert "e2e_latency_p99" in failed_metrics(verdict)
    assert json.loads(json.dumps(verdict)) == verdict
