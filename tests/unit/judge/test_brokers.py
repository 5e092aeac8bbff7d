"""Broker metrics in the judge: canary brokers against the baseline brokers, knowing that brokers differ."""

from __future__ import annotations

import dataclasses

import numpy as np

from canary.judge import Aggregates, JudgeConfig, judge
from canary.judge import histogram as H
from canary.judge.aggregates import broker_cell
from canary.judge.calibration import Calibration
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


def verdict_of(records, config=None, probe=True, buckets=12, before=None):
    agg = Aggregates.from_observations(records, BUCKET)
    if probe:  # the probe's messages, alike in both lanes: 1,000 per lane and bucket at 5 ms
        for lane in ("canary", "baseline"):
            for b in range(buckets):
                for name, k in (("outcome.delivered", 0), ("partition", 0), ("e2e_latency_ms", H.bin_of(5.0)),
                                ("produce_latency_ms", H.bin_of(2.0))):
                    agg.cells[(lane, name)][b * BUCKET][k] = 1_000
    return judge(agg, config or JudgeConfig(), before=before)


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


def work(requests: dict[int, float], bytes_: dict[int, float] | None = None, lanes=LANE_OF) -> list[BrokerReading]:
    """Each broker's work at every reading: `requests` produce and fetch requests per second (half each), and
    client bytes per second (in and out, half each; 1 MB/s by default)."""
    out = []
    for name, per_broker in (("produce_requests_per_s", requests), ("fetch_requests_per_s", requests),
                             ("bytes_in_per_s", bytes_ or {b: 1e6 for b in requests}),
                             ("bytes_out_per_s", bytes_ or {b: 1e6 for b in requests})):
        out += readings({b: v / 2 for b, v in per_broker.items()}, metric=name, lanes=lanes)
    return out


HANDLER = "broker_request_handler_busy_per_request"


def test_an_idle_share_is_judged_as_the_busy_share_per_request():
    """Idle 0.80 against 0.92 at the same 400 requests/s: the canary's handler pool is 2.5 times as busy per request
    (0.5 vs 0.2 per 1000 requests/s), half its headroom gone: FAIL. Idle 0.90 against 0.92 is busier too, but by a
    quarter, within twice as busy: PASS."""
    same = work({1: 400.0, 2: 400.0, 3: 400.0})
    cut = metric(verdict_of(readings({1: 0.80, 2: 0.92, 3: 0.925}, metric="request_handler_idle_ratio") + same),
                 HANDLER)
    assert cut["decision"] == "FAIL", cut["reason"]
    assert cut["canary"]["unit"] == "busy share per 1000 requests/s"
    assert abs(cut["canary"]["value"] - 0.5) < 0.02 and cut["effect"]["relative"] > 1.0
    slight = metric(verdict_of(readings({1: 0.90, 2: 0.92, 3: 0.922}, metric="request_handler_idle_ratio") + same),
                    HANDLER)
    assert slight["decision"] == "PASS" and slight["test"]["significant"], slight["reason"]


def test_a_broker_that_does_less_cannot_look_healthier_for_it():
    """The restarted canary serves an eighth of the requests: its pool is less busy than the baseline's (0.06 vs
    0.10), which alone would pass, but it spends five times as much per request (1.2 vs 0.25 per 1000/s): FAIL. A
    canary that serves twice the requests at twice the busy share is doing the same per request: PASS."""
    less = readings({1: 0.94, 2: 0.90, 3: 0.90}, metric="request_handler_idle_ratio", noise=0.01)
    m = metric(verdict_of(less + work({1: 50.0, 2: 400.0, 3: 400.0})), HANDLER)
    assert m["decision"] == "FAIL", m["reason"]
    more = readings({1: 0.80, 2: 0.90, 3: 0.90}, metric="request_handler_idle_ratio", noise=0.01)
    m = metric(verdict_of(more + work({1: 800.0, 2: 400.0, 3: 400.0})), HANDLER)
    assert m["decision"] == "PASS", m["reason"]


def test_readings_of_a_broker_that_did_next_to_nothing_are_left_out_of_a_per_work_metric():
    """Below 10 requests/s a busy share per request is a fixed cost divided by almost nothing: no canary reading,
    so nothing to compare (NO_DATA), not a failure; the lane comparison of raw values is unaffected."""
    idle = readings({1: 0.99, 2: 0.90, 3: 0.90}, metric="request_handler_idle_ratio")
    m = metric(verdict_of(idle + work({1: 4.0, 2: 400.0, 3: 400.0})), HANDLER)
    assert m["decision"] == "NO_DATA", m
    cpu = metric(verdict_of(readings({1: 0.2, 2: 0.2, 3: 0.2}, metric="cpu_seconds_per_s")
                            + work({1: 400.0, 2: 400.0, 3: 400.0}, {1: 1e6, 2: 4e6, 3: 4e6})), "broker_cpu_per_byte")
    # The same CPU for a quarter of the bytes: four times the CPU per byte.
    assert cpu["decision"] == "FAIL" and cpu["canary"]["unit"] == "s/s per MB/s", cpu


BEFORE = "baseline_produce_total_time_mean_ms"


def before(levels: dict[int, float], metric="produce_total_time_mean_ms", count=6, noise=0.05, seed=1):
    """The brokers' readings before the change (a preflight probe's): `count` readings 5 s apart."""
    rng = np.random.default_rng(seed)
    return Calibration({}, {metric: {-100_000 + 5_000 * k: {b: v * float(np.exp(rng.normal(0, noise)))
                                                             for b, v in levels.items()} for k in range(count)}})


def judged_against_before(now: dict[int, float], then: dict[int, float] | None):
    return verdict_of(readings(now, metric="produce_total_time_mean_ms", noise=0.05),
                      before=before(then) if then else None)


def test_harm_that_lands_on_the_baseline_brokers_is_judged_against_them_before_the_change():
    """A slow follower: the canary broker itself is as fast as before (2 ms), but the baseline brokers' produce
    requests now wait for it (3 -> 30 ms). Canary against baseline the canary looks better; the baseline brokers
    against themselves before the change: FAIL, and the rollout rolls back."""
    verdict = judged_against_before({1: 2.0, 2: 30.0, 3: 31.0}, {1: 2.0, 2: 3.0, 3: 3.1})
    m = metric(verdict, BEFORE)
    assert m["decision"] == "FAIL", m["reason"]
    assert m["canary"]["brokers"] == [2, 3] and m["baseline"]["readings"] == 6
    assert m["canary"]["beyond_before_at_readings"] == m["canary"]["readings"] == 18
    assert verdict["verdict"] == "ROLLBACK" and BEFORE in verdict["reason"]


def test_baseline_brokers_as_they_were_pass_and_without_readings_before_there_is_nothing_to_compare():
    same = metric(judged_against_before({1: 9.0, 2: 3.0, 3: 3.1}, {1: 2.0, 2: 3.0, 3: 3.1}), BEFORE)
    assert same["decision"] == "PASS", same["reason"]   # the canary's own slowness is the lane tests' to judge
    slightly = metric(judged_against_before({1: 2.0, 2: 5.0, 3: 5.2}, {1: 2.0, 2: 3.0, 3: 3.1}), BEFORE)
    assert slightly["decision"] == "PASS", slightly["reason"]   # +2 ms: within +5 ms
    none = metric(judged_against_before({1: 2.0, 2: 30.0, 3: 31.0}, None), BEFORE)
    assert none["decision"] == "NO_DATA" and "before the change" in none["reason"], none


def test_no_change_rarely_convicts_the_baseline_brokers_of_harm():
    """A/A: the baseline brokers' readings before and after come from the same levels with 20 % noise."""
    rng = np.random.default_rng(3)
    failures = 0
    for seed in range(100):
        levels = {b: float(3 * np.exp(rng.uniform(0, 0.3))) for b in (1, 2, 3)}
        verdict = verdict_of(readings(levels, metric="produce_total_time_mean_ms", noise=0.2, seed=seed),
                             before=before(levels, noise=0.2, seed=seed + 1000))
        failures += metric(verdict, BEFORE)["decision"] == "FAIL"
    assert failures <= 1


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


def test_a_just_restarted_jvm_s_first_minute_is_not_held_against_it_a_lasting_cut_is():
    """The restarted canary's handler pool is three times as busy per request until its JIT has compiled the hot
    code (here until 70 s into the window, 40 s after the warm-up): its effort is judged from 45 s after the
    warm-up on, so PASS. A canary that stays three times as busy is a cut: FAIL."""
    same = work({1: 400.0, 2: 400.0, 3: 400.0})
    cold = [r if r.broker != 1 or r.ts >= 70_000 else dataclasses.replace(r, value=0.76)
            for r in readings({1: 0.92, 2: 0.92, 3: 0.921}, metric="request_handler_idle_ratio", noise=0.005)]
    assert metric(verdict_of(cold + same), HANDLER)["decision"] == "PASS"
    assert min(r.ts for r in cold if r.broker == 1 and r.value < 0.8) < 40_000  # at the warm-up's end it was cold
    lasting = readings({1: 0.76, 2: 0.92, 3: 0.921}, metric="request_handler_idle_ratio", noise=0.005)
    m = metric(verdict_of(lasting + same), HANDLER)
    assert m["decision"] == "FAIL", m["reason"]
    assert m["canary"]["readings"] == 9  # from 75 s on (readings at 1 s and 5 s of each 10-s bucket)


def test_with_a_control_broker_the_canary_is_judged_fresh_against_fresh():
    """Broker 2 is a control (restarted with nothing changed beside the canary): a canary produce p99 2.4 times the
    long-running broker 3's, like the control's, is the restart, not the change: PASS. Without the control's
    restart (both baseline brokers long-running) the same canary FAILs. A canary 2.5 times the control's is the
    change: FAIL, and the control is named the reference; the comparison with before the change leaves the control
    out."""
    with_control = JudgeConfig(control_brokers=[2])
    assert metric(verdict_of(readings({1: 24.0, 2: 10.0, 3: 10.5}, noise=0.05)))["decision"] == "FAIL"
    m = metric(verdict_of(readings({1: 24.0, 2: 23.0, 3: 10.0}, noise=0.05), with_control))
    assert m["decision"] == "PASS", m["reason"]
    assert m["baseline"]["brokers"] == [2] and "control" in m["baseline"]["what"]
    slower = metric(verdict_of(readings({1: 48.0, 2: 19.0, 3: 10.0}, noise=0.05), with_control))
    assert slower["decision"] == "FAIL" and "control brokers' median" in slower["reason"], slower["reason"]
    harm = metric(verdict_of(readings({1: 2.0, 2: 9.0, 3: 3.1}, metric="produce_total_time_mean_ms", noise=0.05),
                             with_control, before=before({1: 2.0, 2: 3.0, 3: 3.1})), BEFORE)
    assert harm["canary"]["brokers"] == [3] and harm["decision"] == "PASS", harm


def test_the_control_brokers_travel_with_the_judges_config():
    config = config_from_dict(JudgeConfig(control_brokers=[2, 5]).to_dict())
    assert config.control_brokers == [2, 5] and JudgeConfig().control_brokers == []


FLUSHES = "broker_log_flushes_per_s"


def bursts(every: dict[int, int], buckets: int = 12) -> list[BrokerReading]:
    """Log flushes as segments roll: each broker's every n-th reading holds a burst (1.5/s over its 4-6 s
    interval), its other readings none; 0: no burst at all."""
    out = []
    for r in readings({b: 0.0 for b in every}, metric="log_flushes_per_s", buckets=buckets):
        n, at = every[r.broker], 2 * (r.ts // BUCKET) + (r.ts % BUCKET) // 4_000  # the reading's index
        out.append(dataclasses.replace(r, value=1.5) if n and at % n == r.broker % n else r)
    return out


def test_log_flushes_in_bursts_are_judged_over_a_span_of_readings():
    """1 MiB segments at an idle cluster's safe load: the canary rolls its segments together every other reading
    (0.75 flushes/s on average, 0 at every other reading), the baseline's every 24th (their segments close on
    time): judged reading by reading the canary's median is 0 and it PASSes; each reading as the mean of the last
    20 s, it FAILs. The same bursts in every lane PASS, whatever their phase."""
    segments = bursts({1: 2, 2: 24, 3: 24})
    m = metric(verdict_of(segments), FLUSHES)
    assert m["decision"] == "FAIL", m["reason"]
    assert 0.6 < m["canary"]["value"] < 0.9 and m["baseline"]["value"] < 0.2
    unspanned = config_from_dict({"metrics": {FLUSHES: {"span_s": 0.0, "abs_floor": 0.1}}})
    assert metric(verdict_of(segments, unspanned), FLUSHES)["decision"] == "PASS"
    alike = metric(verdict_of(bursts({1: 3, 2: 3, 3: 3})), FLUSHES)
    assert alike["decision"] == "PASS", alike["reason"]
    assert metric(verdict_of(bursts({1: 0, 2: 0, 3: 0})), FLUSHES)["decision"] == "PASS"
