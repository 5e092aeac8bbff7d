"""The counting metrics' lane comparisons: event rates (errors, loss, availability) with the canary's
tolerance guard, and throughput (acknowledged messages per partition-second)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from canary.judge.aggregates import Window
from canary.judge.alpha import Alphas
from canary.judge.config import MetricSpec
from canary.judge.evidence import (
    Decision,
    MetricResult,
    check_sufficiency,
    conclude,
    finite_or_none,
    format_value,
    slo_guard,
)
from canary.judge.stats import RARE_GRID, bernoulli_cs, conditional_log_e, one_sample_log_e
from canary.observations import LANES

# The canary tolerance guard (loss) decides only from this many events on.
TOLERANCE_MIN_EVENTS = 2


def rate_test(window: Window, metric: MetricSpec, alphas: Alphas, result: MetricResult) -> MetricResult:
    """H0: the canary's odds of the metric's events are at most (1 + rel_floor) times the baseline's."""
    alpha = alphas.test
    x = {lane: window.events(lane, metric.events) for lane in LANES}
    n = {lane: window.among(lane, metric.among) for lane in LANES}
    xc, xb, nc, nb = x["canary"].sum(), x["baseline"].sum(), n["canary"].sum(), n["baseline"].sum()
    comp = metric.display_complement
    lanes: dict[str, dict[str, Any]] = {}
    for lane, xs, ns in (("canary", xc, nc), ("baseline", xb, nb)):
        rate = xs / ns if ns else None
        lo, hi = bernoulli_cs(xs, ns, alpha / 2)
        lanes[lane] = {"events": int(xs), "trials": int(ns), "rate": rate,
                       "value": (1 - rate if comp else rate) if rate is not None else None,
                       "interval": [1 - hi, 1 - lo] if comp else [lo, hi]}
    result, compared = check_sufficiency(result.model_copy(update=lanes), nc, nb, metric, "observations")
    if not compared:
        return result
    rc, rb = xc / nc, xb / nb
    (lc, hc), (lb, hb) = (bernoulli_cs(xc, nc, alpha / 2), bernoulli_cs(xb, nb, alpha / 2))
    sign = -1 if comp else 1
    diff_iv = sorted([sign * (lc - hb), sign * (hc - lb)])
    effect = {"absolute": sign * (rc - rb), "absolute_interval": diff_iv,
              "relative": (rc / rb - 1) if rb > 0 else None,
              "relative_interval": [finite_or_none(lc / hb - 1) if hb > 0 else None,
                                    finite_or_none(hc / lb - 1) if lb > 0 else None]}
    log_e = conditional_log_e(x["canary"], x["baseline"], n["canary"], n["baseline"], psi0=1 + metric.rel_floor)
    material = rc - rb >= metric.abs_floor and (rb == 0 or rc > rb * (1 + metric.rel_floor))
    label = "failure share" if comp else "rate"
    result = conclude(result.model_copy(update={"effect": effect}), log_e, alpha, material,
                      f"canary {label} {format_value(rc, True)} vs baseline {format_value(rb, True)}",
                      f"+{format_value(metric.rel_floor, True)} relative and "
                      f"+{format_value(metric.abs_floor * 100)} points")
    if metric.slo is not None:
        result = slo_guard(result, {lane: (x[lane], n[lane]) for lane in LANES}, metric.slo, alphas.slo_lane,
                           f"{label} <= {format_value(metric.slo, True)}")
    if metric.tolerance is not None:
        result = tolerance_guard(result, x["canary"], n["canary"], metric.tolerance, alphas.tolerance, material,
                                 label)
    return result


def tolerance_guard(result: MetricResult, x: np.ndarray, n: np.ndarray, p0: float, alpha: float, material: bool,
                    label: str) -> MetricResult:
    """The canary's guard for events that should not happen: H0 canary share <= p0 (one-sample e-process over
    alternatives up to a million times p0). Fails the metric when significant, the canary is beyond the
    baseline by the floors (material) and it saw at least TOLERANCE_MIN_EVENTS events: against a tiny p0 a
    single early event is already significant, but one event is not yet a pattern."""
    log_e = one_sample_log_e(x, n, p0, grid=RARE_GRID) if n.sum() > 0 else np.zeros(1)
    e_value = float(np.exp(min(log_e.max(), 700)))
    exceeded = bool(log_e.max() >= math.log(1 / alpha))
    events = int(x.sum())
    result = result.model_copy(update={"tolerance": {
        "tolerance": p0, "e_value": e_value, "threshold": 1 / alpha, "alpha": alpha, "exceeded": exceeded,
        "events": events, "min_events": TOLERANCE_MIN_EVENTS}})
    if exceeded and material and events >= TOLERANCE_MIN_EVENTS and result.decision != Decision.FAIL:
        return result.decided(Decision.FAIL, f"canary {label} significantly above its tolerance "
                                             f"{format_value(p0, True)} (e-value {e_value:.3g} >= {1 / alpha:.3g}) "
                                             f"and beyond the baseline's by the floors; {result.reason}")
    return result


def throughput_test(window: Window, metric: MetricSpec, alpha: float, result: MetricResult) -> MetricResult:
    """H0: the canary's acknowledged messages per partition-second are at least (1 - rel_floor) times the
    baseline's (Poisson counts over each bucket's exposure)."""
    bucket_s = window.agg.bucket_ms / 1000
    x = {lane: window.trials[lane] - window.events(lane, ["produce_error"]) for lane in LANES}
    exposure = {lane: window.partitions[lane] * bucket_s for lane in LANES}
    lanes: dict[str, dict[str, Any]] = {}
    for lane in LANES:
        exposed = exposure[lane].sum()
        lanes[lane] = {"acknowledged": int(x[lane].sum()), "partition_seconds": float(exposed),
                       "value": float(x[lane].sum() / exposed) if exposed else None,
                       "unit": "messages/s per partition"}
    xc, xb = x["canary"].sum(), x["baseline"].sum()
    result, compared = check_sufficiency(result.model_copy(update=lanes), xc, xb, metric, "acknowledged messages")
    if not compared:
        return result
    ec, eb = exposure["canary"].sum(), exposure["baseline"].sum()
    vc, vb = xc / ec, xb / eb
    lo, hi = bernoulli_cs(xc, xc + xb, alpha)
    ratio = [(p / (1 - p)) * eb / ec if p < 1 else math.inf for p in (lo, hi)]
    effect = {"absolute": vc - vb, "relative": vc / vb - 1,
              "relative_interval": [finite_or_none(ratio[0] - 1), finite_or_none(ratio[1] - 1)]}
    log_e = conditional_log_e(x["canary"], x["baseline"], exposure["canary"], exposure["baseline"],
                              psi0=1 - metric.rel_floor, exact=False, decrease=True)
    material = vb - vc >= metric.abs_floor and vc < vb * (1 - metric.rel_floor)
    return conclude(result.model_copy(update={"effect": effect}), log_e, alpha, material,
                    f"canary {format_value(vc)} vs baseline {format_value(vb)} messages/s per partition",
                    f"-{format_value(metric.rel_floor, True)} relative and -{format_value(metric.abs_floor)} absolute")
