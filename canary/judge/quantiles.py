"""The latency (and lag) quantiles' lane comparison: a sequential log-rank test over the tail, with a
fixed-horizon log-rank z at the final look, and each lane's quantiles with their confidence intervals.

Histograms are read as tails: tail[t, j] = the observations of bucket t in bins >= j.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.special import ndtri

from canary.judge import histogram as H
from canary.judge.aggregates import Window
from canary.judge.alpha import Alphas
from canary.judge.config import MetricSpec
from canary.judge.evidence import MetricResult, check_sufficiency, conclude, finite_or_none, format_value, slo_guard
from canary.judge.stats import dkw_radius, tail_log_e, tail_log_rank_z, tail_overdispersion
from canary.observations import LANES, Lane

# A quantile q is tested on the tail above the baseline's 1 - TAIL_SPAN x (1 - q) quantile (p99: from p90).
TAIL_SPAN = 10
# A quantile's test share: this part to the tail e-process (every look), the rest to the fixed-horizon
# log-rank z at the final look (group-sequential: a little interim power buys much final power).
TAIL_E_SHARE = 0.5


@dataclass(frozen=True)
class _Tails:
    """One histogram source in the window, `width` bins wide: per lane the dense counts and tails of each
    of the `buckets` after the warm-up and their totals; the baseline's warm-up counts."""

    buckets: int
    width: int
    dense: dict[Lane, np.ndarray]
    tail: dict[Lane, np.ndarray]
    total: dict[Lane, np.ndarray]
    warm: np.ndarray


def quantile_test(window: Window, metric: MetricSpec, alphas: Alphas, result: MetricResult) -> MetricResult:
    """H0: the canary's tail above the baseline's q_from-quantile is no heavier than the baseline's."""
    alpha = alphas.test * TAIL_E_SHARE  # the e-process's part; the rest is the final look's z test
    q = metric.quantile
    tails = _tails(window, metric.source)
    n_c, n_b = tails.total["canary"].sum(), tails.total["baseline"].sum()
    cum = {lane: tails.tail[lane].sum(axis=0) for lane in LANES}
    est = {lane: _q_from_tail(cum[lane], q) for lane in LANES}
    lanes: dict[str, dict[str, Any]] = {lane: _lane_quantiles(cum[lane], est[lane], q, alpha, metric.source)
                                        for lane in LANES}
    result, compared = check_sufficiency(result.with_test(alpha=alpha, threshold=1 / alpha).model_copy(update=lanes),
                                         n_c, n_b, metric, "samples")
    if not compared:
        return result
    qc, qb = est["canary"], est["baseline"]
    log_e, fixed, test = _tail_test(window.final, alphas.test, tails, q)
    unit = lanes["canary"]["unit"]
    effect_text = f"canary p{100 * q:g} {format_value(qc)} {unit} vs baseline {format_value(qb)} {unit}"
    # The floors judge what changed: a canary broker that was already slower before the change is held to its
    # own pace (canary.judge.calibration), the test itself is left as it is.
    offset = window.offset(metric.source, q)
    calibration = None
    if offset is not None:
        qc = qc / offset.ratio
        calibration = offset.to_dict() | {"canary_calibrated": qc}
        effect_text += (f" (before the change {format_value(offset.canary)} vs {format_value(offset.baseline)}: "
                        f"calibrated {format_value(qc)} {unit})")
    material = qc > qb * (1 + metric.rel_floor) and qc - qb >= metric.abs_floor
    result = result.with_test(**test).model_copy(update={
        "effect": _effect(est["canary"], qb, lanes["canary"]["interval"], lanes["baseline"]["interval"]),
        "calibration": calibration})
    result = conclude(result, log_e, alpha, material, effect_text,
                      f"+{format_value(metric.rel_floor, True)} and +{format_value(metric.abs_floor)} {unit}",
                      what="tail heavier", fixed=fixed)
    if metric.slo is None:
        return result
    j_s = min(H.first_bin_at_least(metric.slo * (1 + 1e-9)), tails.width - 1)
    return slo_guard(result, {lane: (tails.tail[lane][:, j_s], tails.total[lane]) for lane in LANES}, 1 - q,
                     alphas.slo_lane, f"p{100 * q:g} <= {format_value(metric.slo)} {unit}")


def _tails(window: Window, source: str) -> _Tails:
    agg = window.agg
    per = {lane: [agg.hist(lane, source, b) for b in window.buckets] for lane in LANES}
    warm = [agg.hist("baseline", source, b) for b in window.warmup]
    width = 1 + max([k for hs in (*per.values(), warm) for h in hs for k in h] + [0])
    width += 2
    dense = {lane: _dense(per[lane], width) for lane in LANES}
    tail = {lane: np.cumsum(dense[lane][:, ::-1], axis=1)[:, ::-1] for lane in LANES}
    total = {lane: tail[lane][:, 0] if len(window.buckets) else np.zeros(0) for lane in LANES}
    return _Tails(len(window.buckets), width, dense, tail, total, _dense(warm, width))


def _lane_quantiles(cum: np.ndarray, est: float, q: float, alpha: float, source: str) -> dict:
    """A lane's quantile q (`est`) with its anytime-valid interval (DKW), and its p50, p95, p99."""
    n = cum[0]
    eps = dkw_radius(n, alpha / 2)
    return {"count": int(n), "value": finite_or_none(est), "unit": "ms" if source != "lag" else "records",
            "p50": finite_or_none(_q_from_tail(cum, 0.5)), "p95": finite_or_none(_q_from_tail(cum, 0.95)),
            "p99": finite_or_none(_q_from_tail(cum, 0.99)),
            "interval": [finite_or_none(_q_from_tail(cum, q - eps)), finite_or_none(_q_from_tail(cum, q + eps))]}


def _effect(qc: float, qb: float, canary_interval: list, baseline_interval: list) -> dict:
    lo_c, hi_c = canary_interval
    lo_b, hi_b = baseline_interval
    return {"absolute": qc - qb, "relative": qc / qb - 1 if qb > 0 else None,
            "relative_interval": [(lo_c / hi_b - 1) if lo_c is not None and hi_b else None,
                                  (hi_c / lo_b - 1) if hi_c is not None and lo_b else None]}


def _tail_test(final: bool, test_alpha: float, tails: _Tails, q: float) -> tuple[np.ndarray, str, dict[str, Any]]:
    """The tail e-process's running log e-value, the final look's z evidence (text, or empty) and what the test
    records: the overdispersion, the fixed-horizon test, the method and the exceedances of the baseline's
    q-quantile."""
    # The test: a sequential log-rank over the tail, from the baseline's q_from-quantile up, with thresholds
    # fixed before each bucket (the baseline's warm-up and earlier buckets), so within a bucket both lanes
    # face the same predictable thresholds. A tail-only regression changes how far the canary goes on
    # once in the tail far more than how often it enters it, which a single exceedance count cannot see.
    # The null is "the canary's tail is no heavier" (no floors): the floors apply to the point estimates.
    q_from = max(0.0, 1 - TAIL_SPAN * (1 - q))
    past = np.cumsum(np.vstack([tails.warm.sum(axis=0, keepdims=True), tails.dense["baseline"]]), axis=0)[:-1]
    past_tail = np.cumsum(past[:, ::-1], axis=1)[:, ::-1]
    ready = past_tail[:, 0] >= 5 / (1 - q) if tails.buckets else np.zeros(0, dtype=bool)
    j_from = np.argmax(past_tail <= (1 - q_from) * past_tail[:, :1], axis=1)
    j_q = np.argmax(past_tail <= (1 - q) * past_tail[:, :1], axis=1)
    risk, surv = _risk_sets(tails, ready, j_from)
    tables = (risk["canary"], surv["canary"], risk["baseline"], surv["baseline"])
    # A run of one lane's messages delayed by one pause is one event, not hundreds: the evidence is divided by how
    # much more the buckets vary than independent messages would (stats.tail_overdispersion).
    dispersion = tail_overdispersion(*tables)
    log_e = tail_log_e(*tables) / dispersion
    fixed, fixed_horizon = _tail_z(final, test_alpha * (1 - TAIL_E_SHARE), risk, surv)
    exceed = {lane: np.where(ready, np.take_along_axis(tails.tail[lane], j_q[:, None], axis=1)[:, 0], 0)
              for lane in LANES}
    return log_e, fixed, {
        "overdispersion": finite_or_none(float(dispersion[-1])) if dispersion.size else None,
        "fixed_horizon": fixed_horizon, "method": "tail log-rank", "tail_from_quantile": q_from,
        "exceedances": {"canary": int(exceed["canary"].sum()), "canary_of": int(tails.total["canary"][ready].sum()),
                        "baseline": int(exceed["baseline"].sum()),
                        "baseline_of": int(tails.total["baseline"][ready].sum())}}


def _risk_sets(tails: _Tails, ready: np.ndarray, j_from: np.ndarray) -> tuple[dict, dict]:
    """Per lane, bucket and step: how many observations reached the step (risk) and went on past it (surv).
    Step 0 is entering the tail (all -> past j_from), then bin by bin inside it; buckets before the
    baseline's past is `ready` take no part."""
    steps = np.arange(tails.width - 1)[None, :]
    in_tail = ready[:, None] & (steps >= j_from[:, None])
    risk, surv = {}, {}
    for lane in LANES:
        t = tails.tail[lane]
        entry = np.take_along_axis(t, j_from[:, None], axis=1)
        risk[lane] = np.hstack([np.where(ready, t[:, 0], 0)[:, None], np.where(in_tail, t[:, :-1], 0)])
        surv[lane] = np.hstack([np.where(ready[:, None], entry, 0), np.where(in_tail, t[:, 1:], 0)])
    return risk, surv


def _tail_z(final: bool, alpha: float, risk: dict, surv: dict) -> tuple[str, dict[str, Any] | None]:
    """The fixed-horizon log-rank test at the final look (stats.tail_log_rank_z), with alpha split like the
    e-process: 3/4 to the steps inside the tail, 1/4 to all steps. Returns the evidence text when significant (else
    "") and the test's record (the test's `fixed_horizon`: None at an interim look)."""
    if not final:
        return "", None
    z_inside, z_all = tail_log_rank_z(risk["canary"], surv["canary"], risk["baseline"], surv["baseline"])
    crit_inside, crit_all = float(-ndtri(0.75 * alpha)), float(-ndtri(0.25 * alpha))
    hit = [f"log-rank z {z:.2f} >= {c:.2f}{where} at the final look"
           for z, c, where in ((z_inside, crit_inside, " inside the tail"), (z_all, crit_all, ""))
           if z is not None and z >= c]
    return hit[0] if hit else "", {"method": "stratified log-rank z", "alpha": alpha, "z_inside": z_inside,
                                   "critical_inside": crit_inside, "z_all": z_all, "critical_all": crit_all,
                                   "significant": bool(hit)}


def _dense(hists: list[dict[int, int]], width: int) -> np.ndarray:
    out = np.zeros((len(hists), width))
    for i, h in enumerate(hists):
        if h:
            out[i, np.fromiter(h.keys(), dtype=np.int64, count=len(h))] = np.fromiter(h.values(), dtype=float,
                                                                                    count=len(h))
    return out


def _q_from_tail(tail: np.ndarray, q: float) -> float:
    """q-quantile (representative value) from a top-down cumulative count array tail[j] = #(bin >= j)."""
    total = tail[0]
    if total <= 0:
        return math.nan
    if q >= 1:
        return math.inf
    if q <= 0:
        return 0.0
    # smallest j whose cumulative count from below (total - tail[j+1]) reaches q * total
    below = total - np.append(tail[1:], 0.0)
    return H.representative(int(np.argmax(below >= q * total)))
