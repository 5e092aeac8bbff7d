"""The judge: canary vs baseline, metric by metric, and the verdict from the metrics' decisions.

Input: `Aggregates` (canary.judge.aggregates). Output: the verdict as a JSON-able dict (schema in
canary/judge/README.md, version `VERDICT_SCHEMA_VERSION`).
"""

from __future__ import annotations

import numpy as np

from canary.judge.aggregates import Aggregates, Window
from canary.judge.alpha import Alphas, count_tests, metric_shares
from canary.judge.brief import INCONCLUSIVE, PROMOTE, ROLLBACK
from canary.judge.brokers import broker_test
from canary.judge.calibration import Calibration
from canary.judge.config import JudgeConfig, MetricSpec
from canary.judge.evidence import Decision, MetricResult
from canary.judge.quantiles import quantile_test
from canary.judge.rates import rate_test, throughput_test
from canary.observations import LANES, Lane

VERDICT_SCHEMA = "kafka-canary/verdict"
VERDICT_SCHEMA_VERSION = 1
CONCURRENT_SHARE = 0.5   # of the buckets either lane has, both lanes must have (see _not_concurrent)


def judge(agg: Aggregates, config: JudgeConfig | None = None, final: bool = True,
          before: Calibration | None = None) -> dict:
    """The verdict for one run. final=False is an interim look: only a critical metric's regression
    decides (ROLLBACK, fail fast); otherwise the verdict is INCONCLUSIVE and the rollout continues. `before`: the
    same brokers' latencies before the change, which the latency quantiles are calibrated by."""
    config = config or JudgeConfig()
    window = Window(agg, config, final, before)
    tested = [m for m in config.active if _has_data(window, m)]
    shares = metric_shares(config.alpha, config.active, tested)
    results = [judge_metric(window, m, shares[m.name]) if _has_data(window, m) else _no_data(m, shares[m.name])
               for m in config.active]
    empty = [lane for lane in LANES if window.trials[lane].sum() == 0]
    verdict, reason = _decide(window, results, empty)
    excluded = int(sum(agg.bad.values()))
    valid = int(sum(window.trials[lane].sum() for lane in LANES)) + sum(
        sum(agg.outcomes(lane, b).values()) for lane in LANES for b in window.warmup)
    if verdict == PROMOTE and excluded > config.max_excluded_share * (excluded + valid):
        verdict = INCONCLUSIVE
        reason = (f"too much bad data to promote: {excluded} of {excluded + valid} observations excluded "
                  f"(more than max_excluded_share {config.max_excluded_share:g}); the excluded part could hide "
                  f"a regression")
    if agg.bad:
        # Excluded data is never passed over in silence: the reason a person reads names it.
        reason += (f" ({sum(agg.bad.values())} observation(s) excluded: "
                   + ", ".join(f"{k} {v}" for k, v in sorted(agg.bad.items())) + ")")
    return {
        "schema": VERDICT_SCHEMA,
        "schema_version": VERDICT_SCHEMA_VERSION,
        "verdict": verdict,
        "reason": reason,
        "score": _score(results),
        "final": final,
        "run_ids": list(agg.run_ids),
        "window": _window_summary(window),
        "lanes": {lane: {"observations": int(window.trials[lane].sum()),
                         "partitions": int(window.partitions[lane].max()) if window.buckets else 0}
                  for lane in LANES},
        # Added within version 1: which brokers each lane had, and those the latencies were calibrated on.
        "brokers": {"canary": sorted(window.brokers("canary")), "baseline": sorted(window.brokers("baseline")),
                    "calibrated_on": before.brokers if before else None},
        "data_quality": {"excluded": dict(sorted(agg.bad.items())), "excluded_total": excluded, "valid_total": valid,
                         "empty_lanes": empty},
        "alpha": {"total": config.alpha, "tests": sum(count_tests(m) for m in tested),
                  "per_metric": config.alpha / max(1, len(tested)),
                  "by_metric": {m.name: shares[m.name] for m in tested}},
        "metrics": [result.to_dict() for result in results],
        "config": config.to_dict(),
    }


def judge_metric(window: Window, metric: MetricSpec, share: float) -> MetricResult:
    """One metric's result, tested with its `share` of alpha; INSUFFICIENT_DATA instead of a PASS on too
    few samples."""
    alphas = Alphas.split(metric, share)
    result = MetricResult.of(metric, alphas.test)
    if metric.kind == "rate":
        result = rate_test(window, metric, alphas, result)
    elif metric.kind == "throughput":
        result = throughput_test(window, metric, alphas.test, result)
    elif metric.kind == "broker":
        result = broker_test(window, metric, alphas.test, result)
    else:
        result = quantile_test(window, metric, alphas, result)
    if result.insufficient and result.decision == Decision.PASS:
        return result.decided(Decision.INSUFFICIENT_DATA, f"{result.insufficient} ({result.reason})")
    return result


def _decide(window: Window, results: list[MetricResult], empty: list[Lane]) -> tuple[str, str]:
    """The verdict and its reason from the metrics' decisions: a regression rolls back (at an interim look a
    critical one only); too little data, or an interim look, is INCONCLUSIVE; else PROMOTE."""
    config = window.config
    failed = [r for r in results if r.decision == Decision.FAIL]
    critical_failed = [r for r in failed if r.critical]
    missing = [r for r in results if r.decision in (Decision.NO_DATA, Decision.INSUFFICIENT_DATA) and r.must_have_data]
    if critical_failed:
        return ROLLBACK, "critical regression: " + "; ".join(f"{r.name}: {r.reason}" for r in critical_failed)
    if window.final and failed:
        return ROLLBACK, "regression: " + "; ".join(f"{r.name}: {r.reason}" for r in failed)
    if not window.all_buckets:
        return INCONCLUSIVE, "no valid observations in the window"
    if empty:
        return INCONCLUSIVE, f"no observations after the warm-up in lane(s) {', '.join(empty)}"
    if len(window.buckets) < config.min_buckets:
        return INCONCLUSIVE, (f"only {len(window.buckets)} time bucket(s) after the warm-up, "
                              f"{config.min_buckets} needed")
    apart = _not_concurrent(window)
    if apart:
        return INCONCLUSIVE, apart
    if missing:
        return INCONCLUSIVE, "not enough data: " + "; ".join(f"{r.name}: {r.reason}" for r in missing)
    if not window.final:
        return INCONCLUSIVE, ("interim look: no critical regression, continue" +
                              (f" (non-critical regressions so far: {', '.join(r.name for r in failed)})"
                               if failed else ""))
    decided = [r for r in results if r.passed_or_failed]
    if not decided:  # every metric disabled, or none with data: nothing was compared, so nothing is shown healthy
        return INCONCLUSIVE, "no metric could be judged (each is disabled in the judge config or has no data)"
    return PROMOTE, f"no regression beyond the floors in {len(decided)} metric(s) at alpha {config.alpha}"


def _not_concurrent(window: Window) -> str | None:
    """Why the lanes were not observed at the same time, or None. Every comparison is bucket by bucket, so a bucket
    that only one lane has is no evidence either way: lanes whose clocks disagree (a client canary's host minutes
    behind) would otherwise pass every test with nothing compared. Needed: at least min_buckets shared buckets, and
    at least CONCURRENT_SHARE of the buckets either lane has."""
    canary, baseline = window.trials["canary"] > 0, window.trials["baseline"] > 0
    shared, either = int(np.sum(canary & baseline)), int(np.sum(canary | baseline))
    if shared >= window.config.min_buckets and shared >= CONCURRENT_SHARE * either:
        return None
    times = np.array(window.buckets, dtype=float)
    lag_s = (np.average(times, weights=window.trials["baseline"]) -
             np.average(times, weights=window.trials["canary"])) / 1000
    return (f"the lanes were observed at the same time in only {shared} of {either} time bucket(s) after the "
            f"warm-up (the canary's observations are {abs(lag_s):.0f} s {'behind' if lag_s > 0 else 'ahead of'} "
            f"the baseline's on average): lanes not observed together are no evidence of health; check the "
            f"clocks of the hosts that wrote them")


def _score(results: list[MetricResult]) -> float:
    """The weighted share (in %) of the decided metrics that passed."""
    decided = [r for r in results if r.passed_or_failed]
    weight = sum(r.weight for r in decided)
    return round(100 * sum(r.weight for r in decided if r.decision == Decision.PASS) / weight, 1) if weight else 0.0


def _window_summary(window: Window) -> dict:
    bucket_ms = window.agg.bucket_ms
    return {
        "start_ms": window.all_buckets[0] if window.all_buckets else None,
        "end_ms": window.all_buckets[-1] + bucket_ms if window.all_buckets else None,
        "warmup_end_ms": window.warmup_end if window.all_buckets else None,
        "bucket_ms": bucket_ms,
        "buckets_analysed": len(window.buckets),
        "buckets_warmup": len(window.warmup),
    }


def _has_data(window: Window, metric: MetricSpec) -> bool:
    if metric.kind == "broker":
        return bool(window.broker_readings(metric.source))
    if metric.kind != "quantile":
        return bool(window.trials["canary"].sum() + window.trials["baseline"].sum())
    return any(window.agg.hist(lane, metric.source, b) for lane in ("canary", "baseline") for b in window.buckets)


def _no_data(metric: MetricSpec, alpha: float) -> MetricResult:
    return MetricResult.of(metric, alpha).decided(Decision.NO_DATA, "no data in either lane after the warm-up")
