"""The client rollout's default judge asks each shape of service for the data it makes: a consumer-only service,
which writes nothing, and a producer-only one, which reads nothing, both promote when healthy."""

from __future__ import annotations

import pytest

from canary.judge import Aggregates, judge
from canary.judge import histogram as H
from canary.rollout.client.spec import client_judge
from canary.rollout.core.spec import judge_settings

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
