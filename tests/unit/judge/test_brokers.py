"""Broker metrics in the judge: canary brokers against the baseline brokers, knowing that brokers differ."""

from __future__ import annotations

import numpy as np

from canary.judge import Aggregates, JudgeConfig, judge
from canary.judge import histogram as H
from canary.judge.aggregates import broker_cell
from canary.judge.config import config_from_dict
from canary.observations import BrokerReading, Observation

BUCKET = 10_000
LANE_OF = {1: "canary", 2: "baseline", 3: "baseline"}


def readings(levels: dict[int, float], metric="produce_total_time_p99_ms", buckets=12, noise=0.0, seed=0,
             lanes=LANE_OF) -> list[BrokerReading]:
    """Two readings per broker and bucket around its level (relative noise `noise`)."""
    rng = np.random.default_rng(seed)
    out = []
    for b in range(buckets):
        for broker, level in levels.items():
            for k in range(2):
                value = level * float(np.exp(rng.normal(0, noise))) if noise else level
                out.append(BrokerReading("run-1", "sampler", broker, lanes[broker], metric, value,
                                         b * BUCKET + 1_000 + 4_000 * k))
    return out


def verdict_of(records, config=None, probe=True, buckets=12):
    agg = Aggregates.from_observations(records, BUCKET)
    if probe:  # the probe's messages, alike in both lanes: 1,000 per lane and bucket at 5 ms
        for lane in ("canary", "baseline"):
            for b in range(buckets):
                for name, k in (("outcome.delivered", 0), ("partition", 0), ("e2e_latency_ms", H.bin_of(5.0)),
                                ("produce_latency_ms", H.bin_of(2.0))):
                    agg.cells[(lane, name)][b * BUCKET][k] = 1_000
    return judge(agg, config or JudgeConfig())


def metric(verdict, name="broker_produce_total_time_p99_ms"):
    return next(m for m in verdict["metrics"] if m["name"] == name)


def test_a_canary_broker_five_times_slower_to_produce_rolls_back_naming_the_broker_metric():
    verdict = verdict_of(readings({1: 50.0, 2: 10.0, 3: 11.0}, noise=0.05))
    m = metric(verdict)
    assert m["decision"] == "FAIL", m["reason"]
    assert verdict["verdict"] == "ROLLBACK"
    assert "broker_produce_total_time_p99_ms" in verdict["reason"]
    assert m["canary"]["brokers"] == [1] and m["baseline"]["brokers"] == [2, 3]
    assert m["canary"]["worst_at_readings"] == m["canary"]["readings"] == 18  # 2 per bucket, 9 after the warm-up
    assert 3.5 < m["effect"]["relative"] < 4.5


def test_an_idle_share_is_judged_as_the_busy_share_capacity_scales_with():
    """Idle 0.80 against 0.92: the canary's handler pool is 2.5 times as busy (0.20 vs 0.08), half its headroom
    gone: FAIL. Idle 0.95 against 0.97 is busier too, but only by 2 points (floor 5): PASS."""
    cut = metric(verdict_of(readings({1: 0.80, 2: 0.92, 3: 0.925}, metric="request_handler_idle_ratio")),
                 "broker_request_handler_idle_ratio")
    assert cut["decision"] == "FAIL" and cut["canary"]["unit"] == "busy share", cut["reason"]
    assert 0.1 < cut["effect"]["absolute"] < 0.14 and cut["effect"]["relative"] > 1.0
    slight = metric(verdict_of(readings({1: 0.95, 2: 0.97, 3: 0.972}, metric="request_handler_idle_ratio")),
                    "broker_request_handler_idle_ratio")
    assert slight["decision"] == "PASS" and slight["test"]["significant"], slight["reason"]


def test_a_broker_that_is_always_a_little_slower_is_how_brokers_differ_not_a_regression():
    """Today's A/A failure, broker-side: the canary broker is the slowest in every bucket (the rank test is
    significant) but by less than the floor beyond how much the baseline brokers differ: PASS."""
    verdict = verdict_of(readings({1: 16.0, 2: 10.0, 3: 13.0}, noise=0.01))
    m = metric(verdict)
    assert m["test"]["significant"] and m["decision"] == "PASS", m["reason"]
    assert m["baseline"]["spread"] > 1.0
    assert verdict["verdict"] == "PROMOTE"


def test_the_spread_of_the_baseline_brokers_raises_the_bar():
    """The same canary deviation (+12 ms, +109 %) fails next to baseline brokers that agree, and passes next to
    baseline brokers that stray 8 ms from their median themselves (12 - 8 ms is within +50 % of 11 ms)."""
    tight = metric(verdict_of(readings({1: 23.0, 2: 11.0, 3: 11.0}, noise=0.01)))
    loose = metric(verdict_of(readings({1: 23.0, 2: 3.0, 3: 19.0}, noise=0.01)))
    assert tight["decision"] == "FAIL"
    assert loose["decision"] == "PASS", loose["reason"]


def test_without_readings_the_broker_metrics_are_skipped_and_the_probe_decides():
    verdict = verdict_of([])
    assert metric(verdict)["decision"] == "NO_DATA"
    assert verdict["verdict"] == "PROMOTE"


def test_a_lane_without_readings_is_no_data_and_a_config_may_require_them():
    only_baseline = readings({2: 10.0, 3: 11.0})
    assert metric(verdict_of(only_baseline))["decision"] == "NO_DATA"
    config = config_from_dict({"metrics": {"broker_produce_total_time_p99_ms": {"must_have_data": True}}})
    verdict = verdict_of(only_baseline, config)
    assert verdict["verdict"] == "INCONCLUSIVE" and "broker_produce_total_time_p99_ms" in verdict["reason"]


def test_no_change_rarely_fails_whatever_the_brokers_levels():
    """A/A: three brokers with their own levels (up to 30 % apart) and noisy readings, every broker in turn the
    canary; false failures stay within alpha."""
    rng = np.random.default_rng(7)
    runs = failures = 0
    for seed in range(60):
        levels = {b: float(10 * np.exp(rng.uniform(0, 0.3))) for b in (1, 2, 3)}
        for canary in (1, 2, 3):
            lanes = {b: "canary" if b == canary else "baseline" for b in (1, 2, 3)}
            verdict = verdict_of(readings(levels, noise=0.2, seed=seed, lanes=lanes))
            runs += 1
            failures += metric(verdict)["decision"] == "FAIL"
    assert runs == 180 and failures <= 1


def test_the_cells_hold_each_brokers_readings_and_messages_are_unchanged():
    probe = Observation(run_id="run-1", kind="probe", source="p", topic="t", partition=0, leader=1, lane="canary",
                        producer_id="p", message_id="m", seq=0, send_ts=1_000.0, ack_ts=1_002.0, receive_ts=1_004.0,
                        outcome="delivered")
    agg = Aggregates.from_observations([probe, *readings({1: 4.0, 2: 2.0}, buckets=1)], BUCKET)
    assert agg.outcomes("canary", 0) == {"delivered": 1}
    assert {b for at in agg.broker_readings("produce_total_time_p99_ms", 0, BUCKET).values() for b in at} == {1, 2}
    assert (("baseline", broker_cell("produce_total_time_p99_ms", 2))) in agg.cells


def test_a_canary_broker_that_serves_a_consumer_behind_at_a_fraction_of_the_speed_rolls_back():
    """Catch-up reads regress downwards: 20 MB/s against 80 and 85 MB/s is a quarter of the speed (floor: 30 % slower
    beyond the baseline brokers' spread): FAIL. 70 MB/s against the same is within it: PASS."""
    name = "broker_load_catch_up_bytes_per_s"
    slow = metric(verdict_of(readings({1: 20e6, 2: 80e6, 3: 85e6}, metric="load_catch_up_bytes_per_s", noise=0.05)),
                  name)
    assert slow["decision"] == "FAIL", slow["reason"]
    assert "below the baseline" in slow["reason"]
    alike = metric(verdict_of(readings({1: 70e6, 2: 80e6, 3: 85e6}, metric="load_catch_up_bytes_per_s", noise=0.05)),
                   name)
    assert alike["decision"] == "PASS", alike["reason"]
