"""`load: {rate: auto}`: steps of doubling rate until the cluster falls behind, half of the last it kept up with."""

from __future__ import annotations

from canary.probe.load import LoadConfig
from canary.probe.load_sizing import MAX_RATE, judge_step, size_load

CONFIG = LoadConfig("127.0.0.1:9092", 1.0, 1000)


def summary(acked_per_s: float, p99: float | None, failed: int = 0, stopped: str | None = None) -> dict:
    lane = {"partitions": 1, "acked_per_s": acked_per_s, "failed": failed,
            "produce_latency_ms": None if p99 is None else {"p50": 1.0, "p99": p99}}
    return {"stopped_because": stopped, "lanes": {"canary": lane, "baseline": {**lane, "partitions": 2,
                                                                                "acked_per_s": 2 * acked_per_s}}}


def cluster_sustaining(limit: float):
    """A fake measurement: the cluster keeps up to `limit` records/s per partition, then lags and slows."""
    asked: list[float] = []

    def measure(rate: float, seconds: float) -> dict:
        asked.append(rate)
        return summary(min(rate, limit) * 0.97, 8.0 if rate <= limit else 400.0)
    return measure, asked


def test_half_of_the_last_rate_the_cluster_kept_up_with():
    measure, asked = cluster_sustaining(3000)
    sized = size_load(CONFIG, measure=measure)
    assert asked == [250, 500, 1000, 2000, 4000, 4000]  # stops at the first rate that fell behind twice
    assert sized.sustained == 2000 and sized.rate == 1000
    assert [s.kept_up for s in sized.steps] == [True, True, True, True, False, False]
    assert "records/s acknowledged" in sized.steps[-1].why and "p99 400 ms" in sized.steps[-1].why


def test_never_beyond_the_cap_and_nothing_when_the_first_step_fails():
    measure, asked = cluster_sustaining(10 * MAX_RATE)
    assert size_load(CONFIG, measure=measure).sustained == MAX_RATE and asked[-1] == MAX_RATE
    measure, _ = cluster_sustaining(100)
    sized = size_load(CONFIG, measure=measure)
    assert sized.rate == 0 and len(sized.steps) == 2


def test_one_step_that_falls_behind_once_is_measured_again_and_not_taken_as_the_limit():
    measure, asked = cluster_sustaining(3000)
    hiccup = {500}

    def with_a_hiccup(rate: float, seconds: float) -> dict:
        if rate in hiccup:
            hiccup.discard(rate)
            return summary(rate * 0.5, 300.0)  # a pause: half acknowledged, slow
        return measure(rate, seconds)
    sized = size_load(CONFIG, measure=with_a_hiccup)
    assert [s.rate for s in sized.steps] == [250, 500, 500, 1000, 2000, 4000, 4000]
    assert [s.kept_up for s in sized.steps] == [True, False, True, True, True, False, False]
    assert sized.sustained == 2000


def test_a_step_with_failures_or_a_guard_did_not_keep_up():
    assert judge_step(1000, summary(990, 5.0)).kept_up
    assert not judge_step(1000, summary(990, 5.0, failed=3)).kept_up
    assert "failed" in judge_step(1000, summary(990, 5.0, stopped="60 of 1000 load records failed")).why
    assert judge_step(1000, summary(0, None)).why.endswith("nothing acknowledged")
