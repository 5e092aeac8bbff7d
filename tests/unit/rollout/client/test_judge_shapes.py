"""The client rollout's default judge asks each shape of service for the data it makes: a consumer-only service,
which writes nothing, and a producer-only one, which reads nothing, both promote when healthy."""

from __future__ import annotations

import pytest

from canary.judge import Aggregates, judge
from canary.judge import histogram as H
from canary.rollout.client.spec import client_judge, load_client_spec
from canary.rollout.core.spec import SpecError, judge_settings

BUCKET = 5_000


def lane(name: str, writes: int, reads: int, buckets: int = 24) -> list[tuple]:
    """Per bucket `writes` records the lane produced and `reads` it processed, all healthy."""
    rows = []
    for b in range(buckets):
        t = b * BUCKET
        rows += [(name, t, "outcome.delivered", 0, writes + reads), (name, t, "partition", 0, 1)]
        if writes:
            rows.append((name, t, "produce_latency_ms", H.bin_of(3.0), writes))
        if reads:
            rows += [(name, t, "processing_ms", H.bin_of(1.0), reads),
                     (name, t, "e2e_latency_ms", H.bin_of(8.0), reads), (name, t, "lag", H.bin_of(2.0), reads)]
    return rows


@pytest.mark.parametrize("producers, consumers, writes, reads", [(0, 2, 0, 40), (2, 0, 40, 0), (1, 1, 40, 40)],
                         ids=["consumer-only", "producer-only", "consume-and-produce"])
def test_each_shape_promotes_when_healthy(producers, consumers, writes, reads):
    agg = Aggregates.from_rows(lane("canary", writes, reads) + lane("baseline", writes, reads), BUCKET, ["svc"])
    verdict = judge(agg, judge_settings(client_judge(producers, consumers)))
    assert verdict["verdict"] == "PROMOTE", verdict["reason"]


def test_a_shape_that_should_write_but_wrote_nothing_is_not_promoted():
    agg = Aggregates.from_rows(lane("canary", 0, 40) + lane("baseline", 0, 40), BUCKET, ["svc"])
    verdict = judge(agg, judge_settings(client_judge(1, 1)))
    assert verdict["verdict"] == "INCONCLUSIVE" and "produce_latency_p99" in verdict["reason"], verdict["reason"]


def test_window_warmup_replaces_the_judges_and_is_kept_only_when_given():
    """window.warmup: a JVM canary's cold first seconds left out of the comparison (docs/clients.md); run.json keeps
    it only when given, so a run.json written before it existed still matches its spec."""
    base = {"cluster": {"dir": "/tmp/kc"}, "service": {"name": "billing", "topic": "orders", "group": "billing",
                                                       "dir": "/tmp/fleet"}, "change": {"from": "1.0", "to": "2.0"}}
    default = load_client_spec(base)
    assert default.judge_settings().warmup_s == 5.0 and "warmup" not in default.to_dict()
    jvm = load_client_spec(base | {"window": {"duration": "90s", "warmup": "30s"}})
    assert jvm.judge_settings().warmup_s == 30.0 and jvm.to_dict()["warmup"] == 30.0
    assert jvm.judge_settings().metrics == default.judge_settings().metrics  # only the warm-up changes
    with pytest.raises(SpecError, match="warmup 60s leaves nothing of the 60s window to judge"):
        load_client_spec(base | {"window": {"warmup": "1m"}})
