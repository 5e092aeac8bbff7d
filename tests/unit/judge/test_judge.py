"""The judge on constructed aggregates: one case per decision path."""

from __future__ import annotations

import json

import numpy as np
import pytest

from canary.judge import Aggregates, ConfigError, JudgeConfig, failed_metrics, judge, load_config
from canary.judge import histogram as H
from canary.judge.config import config_from_dict
from canary.observations import Observation

BUCKET = 10_000


def lane_rows(lane, buckets, per_bucket, errors=0, latency=5.0, tail=None, partitions=1, start=0, lost=0):
    """Deterministic rows: every bucket has `per_bucket` messages, `errors` produce errors, `lost` lost
    messages; e2e latencies are `latency` ms except the top 10 % which take `tail` ms (default 2 x latency)."""
    rows = []
    tail = tail if tail is not None else 2 * latency
    for b in range(start, start + buckets):
        t = b * BUCKET
        ok = per_bucket - errors - lost
        rows += [(lane, t, "outcome.delivered", 0, ok), (lane, t, "outcome.produce_error", 0, errors),
                 (lane, t, "outcome.lost", 0, lost)]
        rows += [(lane, t, "partition", p, per_bucket // partitions) for p in range(partitions)]
        n_tail = ok // 10
        rows += [(lane, t, "e2e_latency_ms", H.bin_of(latency), ok - n_tail),
                 (lane, t, "e2e_latency_ms", H.bin_of(tail), n_tail),
                 (lane, t, "produce_latency_ms", H.bin_of(2.0), per_bucket - errors)]
    return rows


def run(canary=None, baseline=None, buckets=30, **kw):
    rows = lane_rows("canary", buckets, 100, **(canary or {})) + lane_rows("baseline", buckets, 200, partitions=2,
                                                                        **(baseline or {}))
    return Aggregates.from_rows(rows, BUCKET, ["run-1"])


def metric(verdict, name):
    return next(m for m in verdict["metrics"] if m["name"] == name)


def test_identical_lanes_promote_with_every_metric_explained():
    v = judge(run())
    assert v["verdict"] == "PROMOTE" and v["score"] == 100.0
    assert v["schema"] == "kafka-canary/verdict" and v["schema_version"] == 1
    assert v["window"]["buckets_warmup"] == 3 and v["window"]["buckets_analysed"] == 27
    p99 = metric(v, "e2e_latency_p99")
    assert p99["decision"] == "PASS" and p99["canary"]["count"] == 27 * 100
    assert metric(v, "processing_latency_p99")["decision"] == "NO_DATA"
    json.dumps(v)  # JSON-able as is


def test_latency_regression_in_the_tail_is_a_critical_rollback_even_at_an_interim_look():
    v = judge(run(canary={"tail": 20.0}), final=False)
    assert v["verdict"] == "ROLLBACK" and v["reason"].startswith("critical regression")
    p99 = metric(v, "e2e_latency_p99")
    assert p99["decision"] == "FAIL" and p99["effect"]["relative"] == pytest.approx(1.0, rel=0.05)
    assert metric(v, "e2e_latency_p50")["decision"] == "PASS"
    assert failed_metrics(v) == ["e2e_latency_p95", "e2e_latency_p99"]  # the tail moved: what decided
    assert failed_metrics(judge(run(), final=False)) == []


def paused(lane, buckets, per_bucket, pauses, partitions=1, held=30, pause_ms=300.0):
    """lane_rows, but in each bucket of `pauses` a broker's pause held `held` messages for `pause_ms`."""
    rows = lane_rows(lane, buckets, per_bucket, partitions=partitions)
    for b in pauses:
        rows += [(lane, b * BUCKET, "e2e_latency_ms", H.bin_of(5.0), -held),
                 (lane, b * BUCKET, "e2e_latency_ms", H.bin_of(pause_ms), held)]
    return rows


def test_two_pauses_of_the_canary_against_one_of_the_baseline_are_not_a_regression():
    # An A/A rollout's false rollback: the canary broker paused twice, the baseline once; counted message by
    # message, the canary's p99 tail made an e-value in the billions at the first interim look.
    rows = paused("canary", 30, 100, [8, 9]) + paused("baseline", 30, 200, [20], partitions=2, held=20)
    for final in (False, True):
        p99 = metric(judge(Aggregates.from_rows(rows, BUCKET, ["run-1"]), final=final), "e2e_latency_p99")
        assert p99["decision"] == "PASS" and p99["canary"]["value"] > 10 * p99["baseline"]["value"]
        assert p99["test"]["e_value"] < 20 and p99["test"]["overdispersion"] > 5


def test_a_canary_that_pauses_again_and_again_is_rolled_back():
    rows = paused("canary", 30, 100, range(4, 30, 2)) + paused("baseline", 30, 200, [20], partitions=2, held=20)
    v = judge(Aggregates.from_rows(rows, BUCKET, ["run-1"]), final=False)
    assert v["verdict"] == "ROLLBACK" and "e2e_latency_p99" in failed_metrics(v)


def test_error_rate_regression_rolls_back_and_names_the_metric():
    v = judge(run(canary={"errors": 3}))
    assert v["verdict"] == "ROLLBACK"
    m = metric(v, "produce_error_rate")
    assert m["decision"] == "FAIL" and "produce_error_rate" in v["reason"]
    assert m["canary"]["rate"] == pytest.approx(0.03) and m["baseline"]["rate"] == 0
    lo, hi = m["effect"]["absolute_interval"]
    assert lo <= 0.03 <= hi and m["test"]["e_value"] >= m["test"]["threshold"]


def test_non_critical_regression_continues_at_interim_and_rolls_back_at_the_end():
    config = config_from_dict({"metrics": {"e2e_latency_p99": {"critical": False}}})
    interim = judge(run(canary={"tail": 20.0}), config, final=False)
    assert interim["verdict"] == "INCONCLUSIVE" and "e2e_latency_p99" in interim["reason"]
    assert judge(run(canary={"tail": 20.0}), config, final=True)["verdict"] == "ROLLBACK"


def test_clean_interim_look_is_inconclusive_not_promote():
    v = judge(run(), final=False)
    assert v["verdict"] == "INCONCLUSIVE" and v["reason"].startswith("interim look")


def test_significant_effect_within_the_floors_passes():
    # +4 % in the tail: real, but below the 10 % relative floor.
    config = config_from_dict({"metrics": {"e2e_latency_p99": {"abs_floor": 0.0}}})
    v = judge(run(canary={"tail": 10.4}), config)
    m = metric(v, "e2e_latency_p99")
    assert m["decision"] == "PASS" and v["verdict"] == "PROMOTE"


def test_absolute_floor_blocks_a_large_relative_but_tiny_absolute_regression():
    config = config_from_dict({"metrics": {"e2e_latency_p99": {"abs_floor": 50.0}}})
    v = judge(run(canary={"tail": 20.0}), config)
    assert metric(v, "e2e_latency_p99")["decision"] == "PASS"


def test_too_little_data_is_inconclusive_never_a_pass():
    v = judge(run(buckets=5))  # 2 buckets after a 30 s warm-up
    assert v["verdict"] == "INCONCLUSIVE" and "time bucket" in v["reason"]
    config = config_from_dict({"min_buckets": 1})
    v = judge(run(buckets=5), config)
    assert v["verdict"] == "INCONCLUSIVE" and "not enough data" in v["reason"]
    assert metric(v, "e2e_latency_p99")["decision"] == "INSUFFICIENT_DATA"


def test_empty_lane_is_inconclusive_and_named():
    agg = Aggregates.from_rows(lane_rows("baseline", 30, 200, partitions=2), BUCKET)
    v = judge(agg)
    assert v["verdict"] == "INCONCLUSIVE" and v["data_quality"]["empty_lanes"] == ["canary"]


def test_no_observations_at_all_is_inconclusive():
    v = judge(Aggregates.from_rows([("_bad", -1, "bad.malformed", 0, 7)], BUCKET))
    assert v["verdict"] == "INCONCLUSIVE" and v["data_quality"]["excluded"] == {"malformed": 7}


def test_must_have_data_metric_without_data_is_inconclusive():
    config = config_from_dict({"metrics": {"processing_latency_p99": {"must_have_data": True}}})
    v = judge(run(), config)
    assert v["verdict"] == "INCONCLUSIVE" and "processing_latency_p99" in v["reason"]


def test_slo_guard_catches_harm_to_both_lanes():
    # Both lanes lose 3 %: no difference between lanes, but the shared cluster is hurt.
    v = judge(run(canary={"lost": 3}, baseline={"lost": 6}))
    m = metric(v, "loss_rate")
    assert m["decision"] == "FAIL" and "SLO breached in canary, baseline" in m["reason"]
    assert v["verdict"] == "ROLLBACK"


def test_throughput_drop_rolls_back():
    rows = lane_rows("canary", 30, 50) + lane_rows("baseline", 30, 200, partitions=2)
    config = config_from_dict({"metrics": {"throughput": {"critical": True}}})
    v = judge(Aggregates.from_rows(rows, BUCKET), config)
    m = metric(v, "throughput")
    assert m["decision"] == "FAIL" and m["effect"]["relative"] == pytest.approx(-0.5)
    assert v["verdict"] == "ROLLBACK"


def test_warm_up_is_excluded():
    # A terrible first 30 s in the canary does not count; the same badness afterwards does.
    rows = lane_rows("canary", 3, 100, errors=50) + lane_rows("canary", 27, 100, start=3) + \
        lane_rows("baseline", 30, 200, partitions=2)
    assert judge(Aggregates.from_rows(rows, BUCKET))["verdict"] == "PROMOTE"
    no_warmup = config_from_dict({"warmup_s": 0})
    assert judge(Aggregates.from_rows(rows, BUCKET), no_warmup)["verdict"] == "ROLLBACK"


def test_reference_aggregation_counts_and_excludes_clock_skew():
    common = dict(run_id="r", kind="probe", source="p", topic="t", leader=1, producer_id="p1", error=None)
    obs = [Observation(partition=0, lane="canary", message_id="1", seq=0, send_ts=1000, ack_ts=1002,
                       receive_ts=1005, outcome="delivered", **common),
           Observation(partition=0, lane="canary", message_id="2", seq=1, send_ts=1000, ack_ts=1001,
                       receive_ts=990, outcome="delivered", **common)]
    agg = Aggregates.from_observations(obs, BUCKET)
    assert agg.bad == {"clock_skew": 1}
    assert agg.hist("canary", "e2e_latency_ms", 0) == {H.bin_of(5): 1}
    assert agg.outcomes("canary", 0) == {"delivered": 1}


def test_a_a_false_rollback_rate_is_small_on_random_lanes():
    rng = np.random.default_rng(7)
    rollbacks = 0
    for _ in range(40):
        rows = []
        for lane, n in (("canary", 100), ("baseline", 200)):
            for b in range(30):
                errs = int(rng.binomial(n, 0.01))
                lat = rng.lognormal(np.log(5), 0.6, n - errs)
                bins, counts = np.unique([H.bin_of(x) for x in lat], return_counts=True)
                t = b * BUCKET
                rows += [(lane, t, "outcome.delivered", 0, n - errs), (lane, t, "outcome.produce_error", 0, errs)]
                rows += [(lane, t, "partition", p, 100) for p in range(n // 100)]
                rows += [(lane, t, "e2e_latency_ms", int(k), int(c)) for k, c in zip(bins, counts, strict=True)]
        rollbacks += judge(Aggregates.from_rows(rows, BUCKET))["verdict"] == "ROLLBACK"
    assert rollbacks <= 1


def test_config_file_overrides_and_validation(tmp_path):
    path = tmp_path / "judge.yaml"
    path.write_text("version: 1\nalpha: 0.02\nmetrics:\n  duplicate_rate: {enabled: false}\n"
                    "  e2e_latency_p90: {kind: quantile, source: e2e_latency_ms, quantile: 0.9}\n")
    config = load_config(path)
    names = [m.name for m in config.active]
    assert config.alpha == 0.02 and "duplicate_rate" not in names and "e2e_latency_p90" in names
    assert load_config(None) == JudgeConfig()
    for bad in ("alpha: 2\n", "metrics:\n  x: {source: e2e_latency_ms}\n", "bogus: 1\n",
                "metrics:\n  loss_rate: {events: [nope]}\n", "metrics:\n  throughput: {direction: increase}\n"):
        path.write_text(bad)
        with pytest.raises(ConfigError):
            load_config(path)


def shaped_rows(lane, buckets, body, tail, partitions=1, lost=0):
    """Rows with an explicit latency shape: `body` observations at 5 ms and one at each value of `tail`
    per bucket (repeated `partitions` times), plus `lost` lost messages per bucket."""
    rows = []
    for b in range(buckets):
        t = b * BUCKET
        n = partitions * (body + len(tail))
        rows += [(lane, t, "outcome.delivered", 0, n), (lane, t, "outcome.lost", 0, lost)]
        rows += [(lane, t, "partition", p, n // partitions) for p in range(partitions)]
        rows += [(lane, t, "produce_latency_ms", H.bin_of(2.0), n + lost)]
        rows.append((lane, t, "e2e_latency_ms", H.bin_of(5.0), partitions * body))
        for v in tail:
            rows.append((lane, t, "e2e_latency_ms", H.bin_of(v), partitions))
    return rows


BASE_TAIL = [10, 10, 11, 11, 12, 12, 13, 14, 16, 20]
# The tail test's power is tested here, not the default floors (set for brokers' drift on real clusters): p99 +10 %.
TIGHT = config_from_dict({"metrics": {"e2e_latency_p99": {"rel_floor": 0.1, "abs_floor": 2.0}}})


def test_tail_only_p99_regression_is_caught_though_as_many_enter_the_tail():
    # Both lanes: 10 % of observations above 10 ms (the baseline's p90); the canary goes further once there.
    rows = shaped_rows("canary", 30, 90, [10, 11, 12, 14, 15, 16, 18, 20, 24, 30]) + \
        shaped_rows("baseline", 30, 90, BASE_TAIL, partitions=2)
    v = judge(Aggregates.from_rows(rows, BUCKET), final=False)
    p99 = metric(v, "e2e_latency_p99")
    assert v["verdict"] == "ROLLBACK" and p99["decision"] == "FAIL" and "tail heavier" in p99["reason"]
    assert p99["test"]["method"] == "tail log-rank" and p99["test"]["tail_from_quantile"] == pytest.approx(0.9)
    assert p99["test"]["e_value"] >= p99["test"]["threshold"]
    assert metric(v, "e2e_latency_p50")["decision"] == "PASS"


def test_more_observations_entering_an_unchanged_tail_is_caught_too():
    # The canary sends twice as many observations into the same tail shape: only the entry step shows it.
    rows = shaped_rows("canary", 30, 80, BASE_TAIL * 2) + shaped_rows("baseline", 30, 90, BASE_TAIL, partitions=2)
    p99 = metric(judge(Aggregates.from_rows(rows, BUCKET), TIGHT), "e2e_latency_p99")
    assert p99["decision"] == "FAIL" and p99["test"]["exceedances"]["canary"] > 1.5 * p99["test"]["exceedances"][
        "baseline"] / 2


def test_heavier_tail_within_the_floors_is_significant_but_passes():
    # Every tail value one 2 % bin higher: many observations make it significant, but p99 moves < 10 %.
    shifted = [H.lower(H.bin_of(v) + 1) * 1.001 for v in BASE_TAIL]
    rows = shaped_rows("canary", 60, 90, shifted * 3, partitions=3) + \
        shaped_rows("baseline", 60, 90, BASE_TAIL * 3, partitions=6)
    p99 = metric(judge(Aggregates.from_rows(rows, BUCKET)), "e2e_latency_p99")
    assert p99["decision"] == "PASS" and "tail heavier, significant but within" in p99["reason"]


def test_two_lost_messages_in_a_lossless_baseline_roll_back_through_the_tolerance_guard():
    rows = shaped_rows("canary", 30, 90, BASE_TAIL) + shaped_rows("baseline", 30, 90, BASE_TAIL, partitions=2)
    lossy = [("canary", 100_000, "outcome.lost", 0, 1), ("canary", 200_000, "outcome.lost", 0, 1)]
    v = judge(Aggregates.from_rows(rows + lossy, BUCKET), final=False)
    loss = metric(v, "loss_rate")
    assert v["verdict"] == "ROLLBACK" and loss["decision"] == "FAIL" and "tolerance" in loss["reason"]
    assert loss["tolerance"]["exceeded"] and loss["test"]["e_value"] < loss["test"]["threshold"]
    # One lost message is not yet a pattern, even where it is already significant (right after the warm-up).
    for when in (30_000, 100_000):
        one = judge(Aggregates.from_rows(rows + [("canary", when, "outcome.lost", 0, 1)], BUCKET))
        assert one["verdict"] == "PROMOTE" and metric(one, "loss_rate")["tolerance"]["events"] == 1
    early = judge(Aggregates.from_rows(rows + [("canary", 30_000, "outcome.lost", 0, 1)], BUCKET))
    assert metric(early, "loss_rate")["tolerance"]["exceeded"]


def test_loss_above_the_tolerance_in_both_lanes_alike_is_not_the_canarys_regression():
    # Both lanes lose 1 in 1,000: far above the tolerance, but the canary is no worse than the baseline.
    rows = shaped_rows("canary", 30, 90, BASE_TAIL) + shaped_rows("baseline", 30, 90, BASE_TAIL, partitions=2)
    rows += [(lane, b * BUCKET, "outcome.lost", 0, 1) for b in range(3, 30, 10) for lane in ("canary",)]
    rows += [(lane, b * BUCKET, "outcome.lost", 0, 1) for b in range(3, 30, 5) for lane in ("baseline",)]
    loss = metric(judge(Aggregates.from_rows(rows, BUCKET)), "loss_rate")
    assert loss["tolerance"]["exceeded"] and loss["decision"] == "PASS"


def test_alpha_is_split_over_metrics_by_weight_and_never_exceeds_the_total():
    v = judge(run())
    by = v["alpha"]["by_metric"]
    assert by["e2e_latency_p99"] == pytest.approx(2 * by["e2e_latency_p50"])
    assert by["duplicate_rate"] == pytest.approx(by["e2e_latency_p50"] / 2)
    assert sum(by.values()) == pytest.approx(v["config"]["alpha"])
    loss = metric(v, "loss_rate")
    spent = loss["test"]["alpha"] + loss["tolerance"]["alpha"] + 2 / loss["slo"]["threshold"]
    assert spent == pytest.approx(by["loss_rate"])


def test_tolerance_is_validated():
    with pytest.raises(ConfigError):
        config_from_dict({"metrics": {"e2e_latency_p99": {"tolerance": 1e-6}}})
    with pytest.raises(ConfigError):
        config_from_dict({"metrics": {"loss_rate": {"tolerance": 0.7}}})


def test_too_much_bad_data_is_not_promoted_but_a_little_is_named():
    # 30 buckets x 300 messages = 9,000 valid observations.
    few, many = run(), run()
    few.bad, many.bad = {"malformed": 90}, {"malformed": 600, "clock_skew": 100}
    kept = judge(few)
    assert kept["verdict"] == "PROMOTE" and "90 observation(s) excluded: malformed 90" in kept["reason"]
    assert kept["data_quality"] == {"excluded": {"malformed": 90}, "excluded_total": 90, "valid_total": 9000,
                                    "empty_lanes": []}
    refused = judge(many)
    assert refused["verdict"] == "INCONCLUSIVE"
    assert refused["reason"].startswith("too much bad data to promote: 700 of 9700 observations excluded")
    assert judge(many, config_from_dict({"max_excluded_share": 0.1}))["verdict"] == "PROMOTE"
    # A regression found in the valid data is still a rollback, however much else was bad.
    bad_canary = run(canary={"errors": 30})
    bad_canary.bad = {"malformed": 5000}
    assert judge(bad_canary)["verdict"] == "ROLLBACK"
    with pytest.raises(ConfigError, match="max_excluded_share"):
        judge(few, config_from_dict({"max_excluded_share": 2}))


def test_a_written_config_read_back_keeps_disabled_metrics_disabled(tmp_path):
    # The rollouts write the judge config for the Spark job, which reads it merged over the defaults: a metric the
    # config turned off must stay off (it came back on, and a client rollout was judged on e2e p50 it had disabled).
    import yaml

    from canary.judge.config import load_config

    config = config_from_dict({"metrics": {"e2e_latency_p50": {"enabled": False}, "lag_p99": {"min_samples": 7}}})
    path = tmp_path / "judge.yaml"
    path.write_text(yaml.safe_dump(config.to_dict()))
    again = load_config(path)
    assert "e2e_latency_p50" not in {m.name for m in again.active}
    assert again.to_dict() == config.to_dict()


def lognormal_rows(seed, stretch=1.6, buckets=30):
    """Random e2e latencies, lognormal (median 5 ms, sigma 0.5), 100 canary and 200 baseline per bucket; the
    canary's excess over 9.48 ms (the p90) is multiplied by `stretch` (1.6: p99 +25 %, p50 unchanged)."""
    rng = np.random.default_rng(seed)
    rows = []
    for lane, n in (("canary", 100), ("baseline", 200)):
        for b in range(buckets):
            t = b * BUCKET
            lat = rng.lognormal(np.log(5.0), 0.5, n)
            if lane == "canary":
                lat = np.where(lat > 9.48, 9.48 + (lat - 9.48) * stretch, lat)
            rows += [(lane, t, "outcome.delivered", 0, n), (lane, t, "partition", 0, n),
                     (lane, t, "produce_latency_ms", H.bin_of(2.0), n)]
            bins, counts = np.unique([H.bin_of(x) for x in lat], return_counts=True)
            rows += [(lane, t, "e2e_latency_ms", int(k), int(c)) for k, c in zip(bins, counts, strict=True)]
    return Aggregates.from_rows(rows, BUCKET)


def test_final_look_adds_a_fixed_horizon_log_rank_that_catches_what_the_e_process_misses():
    agg = lognormal_rows(seed=0)
    interim = metric(judge(agg, TIGHT, final=False), "e2e_latency_p99")
    final = metric(judge(agg, TIGHT, final=True), "e2e_latency_p99")
    # The e-process (half the test's alpha, valid at every look) stays below its threshold ...
    assert interim["test"]["e_value"] < interim["test"]["threshold"]
    assert interim["decision"] == "PASS" and interim["test"]["fixed_horizon"] is None
    assert interim["test"]["alpha"] == pytest.approx(final["test"]["fixed_horizon"]["alpha"])
    # ... while the one-time log-rank z at the end of the window, with the other half, shows the heavier tail.
    fixed = final["test"]["fixed_horizon"]
    assert fixed["significant"] and fixed["z_inside"] >= fixed["critical_inside"]
    assert final["decision"] == "FAIL" and "log-rank z" in final["reason"] and "final look" in final["reason"]
    for look in (False, True):  # the verdict is written as JSON: plain Python types only
        json.loads(json.dumps(judge(agg, final=look)))


def test_fixed_horizon_log_rank_stays_quiet_on_identical_lanes():
    for seed in range(5):
        p99 = metric(judge(lognormal_rows(seed=100 + seed, stretch=1.0)), "e2e_latency_p99")
        assert not p99["test"]["fixed_horizon"]["significant"] and p99["decision"] == "PASS"


def test_lanes_whose_clocks_disagree_are_inconclusive_not_a_perfect_promote():
    """A canary 100x slower whose timestamps run 20 minutes behind the baseline's: no bucket holds both lanes, so
    nothing was compared, and the verdict says so instead of PROMOTE with every e-value 1."""
    skewed = Aggregates.from_rows(lane_rows("canary", 30, 100, latency=500.0, start=0)
                                  + lane_rows("baseline", 30, 200, partitions=2, start=120), BUCKET, ["run-1"])
    v = judge(skewed)
    assert v["verdict"] == "INCONCLUSIVE", v["reason"]
    assert "observed at the same time in only 0 of 57" in v["reason"] and "s behind the baseline's" in v["reason"]
    # without the skew the same data rolls back
    assert judge(Aggregates.from_rows(lane_rows("canary", 30, 100, latency=500.0)
                                      + lane_rows("baseline", 30, 200, partitions=2), BUCKET, ["run-1"])
                 )["verdict"] == "ROLLBACK"


def test_lanes_that_overlap_only_in_part_are_judged_on_enough_shared_buckets():
    half = Aggregates.from_rows(lane_rows("canary", 30, 100, start=0)
                                + lane_rows("baseline", 30, 200, partitions=2, start=20), BUCKET, ["run-1"])
    assert judge(half)["verdict"] == "INCONCLUSIVE"  # 10 of 50 buckets shared
    most = Aggregates.from_rows(lane_rows("canary", 30, 100, start=0)
                                + lane_rows("baseline", 30, 200, partitions=2, start=3), BUCKET, ["run-1"])
    assert judge(most)["verdict"] == "PROMOTE"  # 27 of 30 after the warm-up


def test_a_judge_config_that_leaves_no_metric_with_data_never_promotes():
    """Every metric the probe's data feeds disabled, only one it has no data for left on: nothing was compared."""
    from canary.judge.config import DEFAULT_METRICS

    config = config_from_dict({"metrics": {m.name: {"enabled": False} for m in DEFAULT_METRICS
                                           if m.name != "processing_latency_p99"}})
    v = judge(run(canary={"latency": 35.0}), config)
    assert v["verdict"] == "INCONCLUSIVE" and v["reason"].startswith("no metric could be judged")


def service_rows(lane, buckets, produced, processed, processing_errors=0, produce_errors=0):
    """A service lane: per bucket `produced` records it wrote (delivery reports) and `processed` records it read,
    `processing_errors` of them raising, `produce_errors` of its writes failing."""
    rows = []
    for b in range(buckets):
        t = b * BUCKET
        delivered = produced - produce_errors + processed - processing_errors
        rows += [(lane, t, "outcome.delivered", 0, delivered), (lane, t, "outcome.produce_error", 0, produce_errors),
                 (lane, t, "outcome.processing_error", 0, processing_errors), (lane, t, "partition", 0, 1),
                 (lane, t, "produce_latency_ms", H.bin_of(3.0), produced - produce_errors),
                 (lane, t, "processing_ms", H.bin_of(1.0), processed)]
    return rows


def test_error_rates_are_shares_of_what_could_fail_so_not_diluted_by_the_other_observations():
    """A service that writes as many records as it reads: 1.5 % of its processing raising is 1.5 %, not 0.75 % of
    all its observations; 1 % of its writes failing is 1 % of its writes."""
    rows = service_rows("canary", 20, 200, 200, processing_errors=3, produce_errors=2) + service_rows(
        "baseline", 20, 200, 200)
    verdict = judge(Aggregates.from_rows(rows, BUCKET, ["run-1"]), JudgeConfig())
    processing, produce = metric(verdict, "processing_error_rate"), metric(verdict, "produce_error_rate")
    assert processing["canary"]["rate"] == pytest.approx(0.015) and processing["canary"]["trials"] == 17 * 200
    assert produce["canary"]["rate"] == pytest.approx(0.01) and produce["canary"]["trials"] == 17 * 200
    assert processing["decision"] == "FAIL" and produce["decision"] == "FAIL"


def test_among_is_for_rate_metrics():
    with pytest.raises(ConfigError, match="among is for rate metrics, not quantile"):
        config_from_dict({"metrics": {"e2e_latency_p99": {"among": "processed"}}})
    with pytest.raises(ConfigError, match="among"):
        config_from_dict({"metrics": {"processing_error_rate": {"among": "everything"}}})


def test_a_span_is_for_broker_metrics_and_never_negative():
    with pytest.raises(ConfigError, match="settle_s and span_s are for broker metrics, not quantile"):
        config_from_dict({"metrics": {"e2e_latency_p99": {"span_s": 20.0}}})
    with pytest.raises(ConfigError, match="broker_log_flushes_per_s.span_s"):
        config_from_dict({"metrics": {"broker_log_flushes_per_s": {"span_s": -1}}})
    assert config_from_dict({"metrics": {"broker_log_flushes_per_s": {"span_s": 30}}}).metrics[
        "broker_log_flushes_per_s"].span_s == 30


def test_a_service_that_silently_drops_one_record_in_a_hundred_is_rolled_back():
    """Processed, committed, never written on: no error and no loss anywhere else; the records' outputs show it."""
    def lane(name, dropped):
        rows = service_rows(name, 20, 0, 200)
        return rows + [(name, b * BUCKET, "outputs", 0, dropped) for b in range(20)] + [
            (name, b * BUCKET, "outputs", H.bin_of(1), 200 - dropped) for b in range(20)]
    verdict = judge(Aggregates.from_rows(lane("canary", 2) + lane("baseline", 0), BUCKET, ["run-1"]), JudgeConfig())
    dropped = metric(verdict, "dropped_rate")
    assert dropped["decision"] == "FAIL" and dropped["critical"], dropped
    assert dropped["canary"]["rate"] == pytest.approx(0.01) and dropped["canary"]["trials"] == 17 * 200
    assert verdict["verdict"] == "ROLLBACK" and "dropped_rate" in verdict["reason"]
    consumer_only = judge(Aggregates.from_rows(service_rows("canary", 20, 0, 200) + service_rows(
        "baseline", 20, 0, 200), BUCKET, ["run-1"]), JudgeConfig())
    assert metric(consumer_only, "dropped_rate")["decision"] == "NO_DATA"
