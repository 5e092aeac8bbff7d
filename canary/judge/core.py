"""The judge: canary vs baseline, metric by metric, from the Spark job's aggregates (DESIGN.md §6).

Input: `Aggregates` — counts per lane × time bucket × metric × histogram bin (see
canary/analysis/job.py for how they are made). Output: the verdict as a JSON-able dict
(schema in canary/judge/README.md, version `VERDICT_SCHEMA_VERSION`).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np
from scipy.special import ndtri

from canary.judge import histogram as H
from canary.judge.config import JudgeConfig, MetricSpec
from canary.judge.stats import (
    RARE_GRID,
    bernoulli_cs,
    conditional_log_e,
    dkw_radius,
    one_sample_log_e,
    tail_log_e,
    tail_log_rank_z,
)
from canary.observations import LANES

VERDICT_SCHEMA = "kafka-canary/verdict"
VERDICT_SCHEMA_VERSION = 1
PROMOTE, ROLLBACK, INCONCLUSIVE = "PROMOTE", "ROLLBACK", "INCONCLUSIVE"
PASS, FAIL, NO_DATA, INSUFFICIENT = "PASS", "FAIL", "NO_DATA", "INSUFFICIENT_DATA"
OUTCOME_PREFIX, BAD_PREFIX, BAD_LANE = "outcome.", "bad.", "_bad"
# A quantile q is tested on the tail above the baseline's 1 - TAIL_SPAN x (1 - q) quantile (p99: from p90).
TAIL_SPAN = 10
# Alpha split: a metric's share is proportional to max(weight, MIN_ALPHA_WEIGHT); SLO_SHARE of it goes to
# the two lanes' SLO guards, half of the rest to the canary's tolerance guard when the metric has one.
MIN_ALPHA_WEIGHT = 0.25
SLO_SHARE = 0.1
# The canary tolerance guard (loss) decides only from this many events on.
TOLERANCE_MIN_EVENTS = 2
# A quantile's test share: this part to the tail e-process (every look), the rest to the fixed-horizon
# log-rank z at the final look (group-sequential: a little interim power buys much final power).
TAIL_E_SHARE = 0.5


@dataclass
class Aggregates:
    """cells[(lane, metric)][bucket_start_ms][bin] = count. Metrics: `outcome.<outcome>` (bin 0),
    `partition` (bin = partition number), and the histogram sources of canary.judge.config.SOURCES.
    bad[reason] = observations excluded for that reason."""

    bucket_ms: int
    cells: dict = field(default_factory=lambda: defaultdict(lambda: defaultdict(dict)))
    bad: dict = field(default_factory=dict)
    run_ids: list = field(default_factory=list)

    @classmethod
    def from_rows(cls, rows: Iterable, bucket_ms: int, run_ids: Iterable[str] = ()) -> Aggregates:
        """rows: (lane, bucket_start_ms, metric, bin, count) tuples or dicts with those keys."""
        agg = cls(bucket_ms=int(bucket_ms), run_ids=sorted(set(run_ids)))
        for row in rows:
            if isinstance(row, dict):
                row = (row["lane"], row["bucket_start_ms"], row["metric"], row["bin"], row["count"])
            lane, bucket, metric, b, count = row
            if lane == BAD_LANE:
                reason = metric.removeprefix(BAD_PREFIX)
                agg.bad[reason] = agg.bad.get(reason, 0) + int(count)
                continue
            cell = agg.cells[(lane, metric)][int(bucket)]
            cell[int(b)] = cell.get(int(b), 0) + int(count)
        return agg

    @classmethod
    def from_observations(cls, observations: Iterable, bucket_ms: int, bad: dict[str, int] | None = None
                          ) -> Aggregates:
        """Reference aggregation of Observation objects in plain Python (the Spark job does the same at
        scale): for tests, simulations and small interim checks without Spark. `bad`: records already excluded
        while reading, per reason (canary.observations.read_observations), counted in the verdict."""
        counts: dict[tuple, int] = defaultdict(int)
        for reason, n in (bad or {}).items():
            counts[(BAD_LANE, -1, BAD_PREFIX + reason, 0)] += n
        run_ids = set()
        for o in observations:
            bucket = o.send_ts // bucket_ms * bucket_ms
            run_ids.add(o.run_id)
            if o.receive_ts is not None and o.receive_ts < o.send_ts or o.ack_ts is not None and o.ack_ts < o.send_ts:
                counts[(BAD_LANE, bucket, BAD_PREFIX + "clock_skew", 0)] += 1
                continue
            counts[(o.lane, bucket, OUTCOME_PREFIX + o.outcome, 0)] += 1
            counts[(o.lane, bucket, "partition", o.partition)] += 1
            for metric, value in (("e2e_latency_ms", o.e2e_latency_ms), ("produce_latency_ms", o.produce_latency_ms),
                                  ("processing_ms", o.processing_ms), ("lag", o.lag)):
                if value is not None:
                    counts[(o.lane, bucket, metric, H.bin_of(value))] += 1
        return cls.from_rows([(*k, c) for k, c in counts.items()], bucket_ms, run_ids)

    def buckets(self) -> list[int]:
        return sorted({b for (lane, _), by in self.cells.items() if lane in LANES for b in by})

    def hist(self, lane: str, metric: str, bucket: int) -> dict[int, int]:
        by = self.cells.get((lane, metric))
        return by.get(bucket, {}) if by else {}

    def outcomes(self, lane: str, bucket: int) -> dict[str, int]:
        return {metric.removeprefix(OUTCOME_PREFIX): by.get(bucket, {}).get(0, 0)
                for (ln, metric), by in self.cells.items() if ln == lane and metric.startswith(OUTCOME_PREFIX)}


def _fmt(x: float | None, pct: bool = False) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return f"{100 * x:.3g} %" if pct else f"{x:.4g}"


def _finite(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


class _Run:
    """Per-run quantities every metric needs: buckets in and after the warm-up, trials, partitions."""

    def __init__(self, agg: Aggregates, config: JudgeConfig, final: bool = True):
        self.agg, self.config, self.final = agg, config, final
        self.all_buckets = agg.buckets()
        start = self.all_buckets[0] if self.all_buckets else 0
        self.warmup_end = start + int(config.warmup_s * 1000)
        self.warmup = [b for b in self.all_buckets if b < self.warmup_end]
        self.buckets = [b for b in self.all_buckets if b >= self.warmup_end]
        self.outcomes = {lane: [agg.outcomes(lane, b) for b in self.buckets] for lane in LANES}
        self.trials = {lane: np.array([sum(o.values()) for o in self.outcomes[lane]], dtype=float) for lane in LANES}
        self.partitions = {lane: np.array([len(agg.hist(lane, "partition", b)) for b in self.buckets], dtype=float)
                           for lane in LANES}

    def events(self, lane: str, names: Iterable[str]) -> np.ndarray:
        names = tuple(names)
        return np.array([sum(o.get(n, 0) for n in names) for o in self.outcomes[lane]], dtype=float)


def judge(agg: Aggregates, config: JudgeConfig | None = None, final: bool = True) -> dict:
    """The verdict for one run. final=False is an interim look: only a critical metric's regression
    decides (ROLLBACK, fail fast); otherwise the verdict is INCONCLUSIVE and the rollout continues."""
    config = (config or JudgeConfig()).validate()
    run = _Run(agg, config, final)
    # Bonferroni: alpha is split over the metrics that have data at all (whether a run carries client fields
    # is fixed by its kind, not by the comparison) in proportion to their weight, so the metrics that
    # matter most get the most power; a metric with an SLO guard gives a tenth of its share to the guard,
    # a twentieth per lane.
    metrics = [m for m in config.active if _has_data(run, m)]
    total_weight = sum(_alpha_weight(m) for m in metrics)
    shares = {m.name: config.alpha * _alpha_weight(m) / total_weight if total_weight else config.alpha
              for m in config.active}
    n_tests = sum(_n_tests(m) for m in metrics)
    results = [_judge_metric(run, m, shares[m.name]) if _has_data(run, m) else _no_data(m, shares[m.name])
               for m in config.active]

    empty = [lane for lane in LANES if run.trials[lane].sum() == 0]
    failed = [r for r in results if r["decision"] == FAIL]
    critical_failed = [r for r in failed if r["critical"]]
    missing = [r for r in results if r["decision"] in (NO_DATA, INSUFFICIENT) and r["must_have_data"]]
    decided = [r for r in results if r["decision"] in (PASS, FAIL)]
    weight = sum(r["weight"] for r in decided)
    score = round(100 * sum(r["weight"] for r in decided if r["decision"] == PASS) / weight, 1) if weight else 0.0

    if critical_failed:
        verdict, reason = ROLLBACK, "critical regression: " + "; ".join(f"{r['name']}: {r['reason']}"
                                                                        for r in critical_failed)
    elif final and failed:
        verdict, reason = ROLLBACK, "regression: " + "; ".join(f"{r['name']}: {r['reason']}" for r in failed)
    elif not run.all_buckets:
        verdict, reason = INCONCLUSIVE, "no valid observations in the window"
    elif empty:
        verdict, reason = INCONCLUSIVE, f"no observations after the warm-up in lane(s) {', '.join(empty)}"
    elif len(run.buckets) < config.min_buckets:
        verdict, reason = INCONCLUSIVE, (f"only {len(run.buckets)} time bucket(s) after the warm-up, "
                                         f"{config.min_buckets} needed")
    elif missing:
        verdict, reason = INCONCLUSIVE, "not enough data: " + "; ".join(f"{r['name']}: {r['reason']}"
                                                                        for r in missing)
    elif not final:
        verdict, reason = INCONCLUSIVE, ("interim look: no critical regression, continue" +
                                         (f" (non-critical regressions so far: {', '.join(r['name'] for r in failed)})"
                                          if failed else ""))
    else:
        verdict = PROMOTE
        reason = f"no regression beyond the floors in {len(decided)} metric(s) at alpha {config.alpha}"

    excluded = int(sum(agg.bad.values()))
    valid = int(sum(run.trials[lane].sum() for lane in LANES)) + sum(
        sum(agg.outcomes(lane, b).values()) for lane in LANES for b in run.warmup)
    if verdict == PROMOTE and excluded > config.max_excluded_share * (excluded + valid):
        verdict = INCONCLUSIVE
        reason = (f"too much bad data to promote: {excluded} of {excluded + valid} observations excluded "
                  f"(more than max_excluded_share {config.max_excluded_share:g}); the excluded part could hide "
                  f"a regression")
    if agg.bad:
        # Excluded data is never passed over in silence: the reason a person reads names it.
        reason += (f" ({sum(agg.bad.values())} observation(s) excluded: "
                   + ", ".join(f"{k} {v}" for k, v in sorted(agg.bad.items())) + ")")
    bucket_ms = agg.bucket_ms
    return {
        "schema": VERDICT_SCHEMA,
        "schema_version": VERDICT_SCHEMA_VERSION,
        "verdict": verdict,
        "reason": reason,
        "score": score,
        "final": final,
        "run_ids": list(agg.run_ids),
        "window": {
            "start_ms": run.all_buckets[0] if run.all_buckets else None,
            "end_ms": run.all_buckets[-1] + bucket_ms if run.all_buckets else None,
            "warmup_end_ms": run.warmup_end if run.all_buckets else None,
            "bucket_ms": bucket_ms,
            "buckets_analysed": len(run.buckets),
            "buckets_warmup": len(run.warmup),
        },
        "lanes": {lane: {"observations": int(run.trials[lane].sum()),
                         "partitions": int(run.partitions[lane].max()) if run.buckets else 0} for lane in LANES},
        "data_quality": {"excluded": dict(sorted(agg.bad.items())), "excluded_total": excluded, "valid_total": valid,
                         "empty_lanes": empty},
        "alpha": {"total": config.alpha, "tests": n_tests, "per_metric": config.alpha / max(1, len(metrics)),
                  "by_metric": {m.name: shares[m.name] for m in metrics}},
        "metrics": results,
        "config": config.to_dict(),
    }


def _base(m: MetricSpec, alpha: float) -> dict:
    return {"name": m.name, "kind": m.kind, "direction": m.direction, "critical": m.critical,
            "must_have_data": m.must_have_data, "weight": m.weight, "decision": NO_DATA, "reason": "",
            "canary": {}, "baseline": {}, "effect": {},
            "test": {"e_value": None, "threshold": 1 / alpha, "alpha": alpha}, "slo": None, "tolerance": None}


def _sufficiency(r: dict, n_c: float, n_b: float, m: MetricSpec, unit: str) -> bool:
    if n_c == 0 and n_b == 0:
        r["decision"], r["reason"] = NO_DATA, f"no {unit} in either lane after the warm-up"
        return False
    if min(n_c, n_b) < m.min_samples:
        # Too little to pass, but an anytime-valid regression is still a regression: the test runs anyway.
        r["insufficient"] = f"{int(min(n_c, n_b))} {unit} in the smaller lane, {m.min_samples} needed"
    return True


def _conclude(r: dict, log_e: np.ndarray, alpha: float, material: bool, effect_text: str, floor_text: str,
              what: str = "", fixed: str = "") -> None:
    """what: names the tested claim when it differs from the effect itself (quantiles: the tail).
    fixed: the evidence of a significant fixed-horizon test at the final look (quantiles), else empty."""
    e_max = float(np.exp(min(log_e.max(), 700))) if log_e.size else 1.0
    r["test"]["e_value"] = e_max
    by_e = bool(log_e.size > 0 and log_e.max() >= math.log(1 / alpha))  # a numpy bool is not JSON
    significant = by_e or bool(fixed)
    r["test"]["significant"] = significant
    claim = f"{what}, " if what else ""
    evidence = f"e-value {e_max:.3g} >= {1 / alpha:.3g}" if by_e else fixed
    if significant and material:
        r["decision"] = FAIL
        r["reason"] = f"{effect_text}; beyond {floor_text} ({claim}{evidence})"
    elif significant:
        r["decision"], r["reason"] = PASS, f"{effect_text}; {claim}significant but within {floor_text}"
    else:
        r["decision"], r["reason"] = PASS, f"{effect_text}; no regression beyond {floor_text} (e-value {e_max:.3g})"


def _slo(r: dict, series: dict[str, tuple[np.ndarray, np.ndarray]], p0: float, alpha: float, text: str) -> None:
    """series[lane] = (events, trials) per bucket; H0 per lane: share of events <= p0."""
    lanes = {}
    breached = []
    for lane, (x, n) in series.items():
        log_e = one_sample_log_e(x, n, p0) if n.sum() > 0 else np.zeros(1)
        e = float(np.exp(min(log_e.max(), 700)))
        lanes[lane] = {"e_value": e, "breached": bool(log_e.max() >= math.log(1 / alpha))}
        if lanes[lane]["breached"]:
            breached.append(lane)
    r["slo"] = {"guard": text, "threshold": 1 / alpha, "lanes": lanes}
    if breached:
        r["decision"] = FAIL
        r["reason"] = f"SLO breached in {', '.join(breached)} ({text}); " + r["reason"]


def _has_data(run: _Run, m: MetricSpec) -> bool:
    if m.kind != "quantile":
        return bool(run.trials["canary"].sum() + run.trials["baseline"].sum())
    return any(run.agg.hist(lane, m.source, b) for lane in ("canary", "baseline") for b in run.buckets)


def _no_data(m: MetricSpec, alpha: float) -> dict:
    r = _base(m, alpha)
    r["reason"] = "no data in either lane after the warm-up"
    return r


def _alpha_weight(m: MetricSpec) -> float:
    return max(m.weight, MIN_ALPHA_WEIGHT)


def _n_tests(m: MetricSpec) -> int:
    return 1 + (2 if m.slo is not None else 0) + (1 if m.tolerance is not None else 0)


@dataclass(frozen=True)
class _Alphas:
    """One metric's share of alpha, split over its tests: the lane comparison, each lane's SLO guard and
    the canary's tolerance guard."""

    test: float
    slo_lane: float
    tolerance: float

    @classmethod
    def split(cls, m: MetricSpec, share: float) -> _Alphas:
        slo = SLO_SHARE if m.slo is not None else 0.0
        tolerance = (1 - slo) / 2 if m.tolerance is not None else 0.0
        return cls(test=share * (1 - slo - tolerance), slo_lane=share * slo / 2, tolerance=share * tolerance)


def _judge_metric(run: _Run, m: MetricSpec, share: float) -> dict:
    alphas = _Alphas.split(m, share)
    r = _base(m, alphas.test)
    if m.kind == "rate":
        _rate(run, m, alphas, r)
    elif m.kind == "throughput":
        _throughput(run, m, alphas.test, r)
    else:
        _quantile(run, m, alphas, r)
    short = r.pop("insufficient", None)
    if short and r["decision"] == PASS:
        r["decision"], r["reason"] = INSUFFICIENT, f"{short} ({r['reason']})"
    return r


def _rate(run: _Run, m: MetricSpec, alphas: _Alphas, r: dict) -> None:
    alpha = alphas.test
    x = {lane: run.events(lane, m.events) for lane in LANES}
    n = run.trials
    xc, xb, nc, nb = x["canary"].sum(), x["baseline"].sum(), n["canary"].sum(), n["baseline"].sum()
    comp = m.display_complement
    for lane, xs, ns in (("canary", xc, nc), ("baseline", xb, nb)):
        rate = xs / ns if ns else None
        lo, hi = bernoulli_cs(xs, ns, alpha / 2)
        r[lane] = {"events": int(xs), "trials": int(ns), "rate": rate,
                   "value": (1 - rate if comp else rate) if rate is not None else None,
                   "interval": [1 - hi, 1 - lo] if comp else [lo, hi]}
    if not _sufficiency(r, nc, nb, m, "observations"):
        return
    rc, rb = xc / nc, xb / nb
    (lc, hc), (lb, hb) = (bernoulli_cs(xc, nc, alpha / 2), bernoulli_cs(xb, nb, alpha / 2))
    sign = -1 if comp else 1
    diff_iv = sorted([sign * (lc - hb), sign * (hc - lb)])
    r["effect"] = {"absolute": sign * (rc - rb), "absolute_interval": diff_iv,
                   "relative": (rc / rb - 1) if rb > 0 else None,
                   "relative_interval": [_finite(lc / hb - 1) if hb > 0 else None,
                                         _finite(hc / lb - 1) if lb > 0 else None]}
    log_e = conditional_log_e(x["canary"], x["baseline"], n["canary"], n["baseline"], psi0=1 + m.rel_floor)
    material = rc - rb >= m.abs_floor and (rb == 0 or rc > rb * (1 + m.rel_floor))
    label = "failure share" if comp else "rate"
    _conclude(r, log_e, alpha, material,
              f"canary {label} {_fmt(rc, True)} vs baseline {_fmt(rb, True)}",
              f"+{_fmt(m.rel_floor, True)} relative and +{_fmt(m.abs_floor * 100)} points")
    if m.slo is not None:
        _slo(r, {lane: (x[lane], n[lane]) for lane in LANES}, m.slo, alphas.slo_lane,
             f"{label} <= {_fmt(m.slo, True)}")
    if m.tolerance is not None:
        _tolerance(r, x["canary"], n["canary"], m.tolerance, alphas.tolerance, material, label)


def _tolerance(r: dict, x: np.ndarray, n: np.ndarray, p0: float, alpha: float, material: bool, label: str) -> None:
    """The canary's guard for events that should not happen: H0 canary share <= p0 (one-sample e-process over
    alternatives up to a million times p0). Fails the metric when significant, the canary is beyond the
    baseline by the floors (material) and it saw at least TOLERANCE_MIN_EVENTS events: against a tiny p0 a
    single early event is already significant, but one event is not yet a pattern."""
    log_e = one_sample_log_e(x, n, p0, grid=RARE_GRID) if n.sum() > 0 else np.zeros(1)
    e = float(np.exp(min(log_e.max(), 700)))
    exceeded = bool(log_e.max() >= math.log(1 / alpha))
    events = int(x.sum())
    r["tolerance"] = {"tolerance": p0, "e_value": e, "threshold": 1 / alpha, "alpha": alpha, "exceeded": exceeded,
                      "events": events, "min_events": TOLERANCE_MIN_EVENTS}
    if exceeded and material and events >= TOLERANCE_MIN_EVENTS and r["decision"] != FAIL:
        r["decision"] = FAIL
        r["reason"] = (f"canary {label} significantly above its tolerance {_fmt(p0, True)} "
                       f"(e-value {e:.3g} >= {1 / alpha:.3g}) and beyond the baseline's by the floors; " + r["reason"])


def _throughput(run: _Run, m: MetricSpec, alpha: float, r: dict) -> None:
    bucket_s = run.agg.bucket_ms / 1000
    x = {lane: run.trials[lane] - run.events(lane, ["produce_error"]) for lane in LANES}
    exposure = {lane: run.partitions[lane] * bucket_s for lane in LANES}
    for lane in LANES:
        e = exposure[lane].sum()
        r[lane] = {"acknowledged": int(x[lane].sum()), "partition_seconds": float(e),
                   "value": float(x[lane].sum() / e) if e else None, "unit": "messages/s per partition"}
    xc, xb = x["canary"].sum(), x["baseline"].sum()
    if not _sufficiency(r, xc, xb, m, "acknowledged messages"):
        return
    ec, eb = exposure["canary"].sum(), exposure["baseline"].sum()
    vc, vb = xc / ec, xb / eb
    lo, hi = bernoulli_cs(xc, xc + xb, alpha)
    ratio = [(p / (1 - p)) * eb / ec if p < 1 else math.inf for p in (lo, hi)]
    r["effect"] = {"absolute": vc - vb, "relative": vc / vb - 1,
                   "relative_interval": [_finite(ratio[0] - 1), _finite(ratio[1] - 1)]}
    log_e = conditional_log_e(x["canary"], x["baseline"], exposure["canary"], exposure["baseline"],
                              psi0=1 - m.rel_floor, exact=False, decrease=True)
    material = vb - vc >= m.abs_floor and vc < vb * (1 - m.rel_floor)
    _conclude(r, log_e, alpha, material, f"canary {_fmt(vc)} vs baseline {_fmt(vb)} messages/s per partition",
              f"-{_fmt(m.rel_floor, True)} relative and -{_fmt(m.abs_floor)} absolute")


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


def _tail_z(r: dict, final: bool, alpha: float, risk: dict, surv: dict) -> str:
    """The fixed-horizon log-rank test at the final look (stats.tail_log_rank_z), with alpha split like the
    e-process: 3/4 to the steps inside the tail, 1/4 to all steps. Recorded in r["test"]["fixed_horizon"]
    (None at an interim look); returns the evidence text when significant, else ""."""
    if not final:
        r["test"]["fixed_horizon"] = None
        return ""
    z_inside, z_all = tail_log_rank_z(risk["canary"], surv["canary"], risk["baseline"], surv["baseline"])
    crit_inside, crit_all = float(-ndtri(0.75 * alpha)), float(-ndtri(0.25 * alpha))
    hit = [f"log-rank z {z:.2f} >= {c:.2f}{where} at the final look"
           for z, c, where in ((z_inside, crit_inside, " inside the tail"), (z_all, crit_all, ""))
           if z is not None and z >= c]
    r["test"]["fixed_horizon"] = {"method": "stratified log-rank z", "alpha": alpha, "z_inside": z_inside,
                                  "critical_inside": crit_inside, "z_all": z_all, "critical_all": crit_all,
                                  "significant": bool(hit)}
    return hit[0] if hit else ""


def _quantile(run: _Run, m: MetricSpec, alphas: _Alphas, r: dict) -> None:
    alpha = alphas.test * TAIL_E_SHARE  # the e-process's part; the rest is the final look's z test
    r["test"].update(alpha=alpha, threshold=1 / alpha)
    agg, q = run.agg, m.quantile
    per = {lane: [agg.hist(lane, m.source, b) for b in run.buckets] for lane in LANES}
    warm = [agg.hist("baseline", m.source, b) for b in run.warmup]
    width = 1 + max([k for hs in (*per.values(), warm) for h in hs for k in h] + [0])
    width += 2
    dense = {lane: _dense(per[lane], width) for lane in LANES}
    # tail[t, j] = observations of bucket t in bins >= j
    tail = {lane: np.cumsum(dense[lane][:, ::-1], axis=1)[:, ::-1] for lane in LANES}
    total = {lane: tail[lane][:, 0] if len(run.buckets) else np.zeros(0) for lane in LANES}
    n_c, n_b = total["canary"].sum(), total["baseline"].sum()
    cum = {lane: tail[lane].sum(axis=0) for lane in LANES}
    est = {lane: _q_from_tail(cum[lane], q) for lane in LANES}
    for lane in LANES:
        n = cum[lane][0]
        eps = dkw_radius(n, alpha / 2)
        r[lane] = {"count": int(n), "value": _finite(est[lane]), "unit": "ms" if m.source != "lag" else "records",
                   "p50": _finite(_q_from_tail(cum[lane], 0.5)), "p95": _finite(_q_from_tail(cum[lane], 0.95)),
                   "p99": _finite(_q_from_tail(cum[lane], 0.99)),
                   "interval": [_finite(_q_from_tail(cum[lane], q - eps)), _finite(_q_from_tail(cum[lane], q + eps))]}
    if not _sufficiency(r, n_c, n_b, m, "samples"):
        return
    qc, qb = est["canary"], est["baseline"]
    lo_c, hi_c = r["canary"]["interval"]
    lo_b, hi_b = r["baseline"]["interval"]
    r["effect"] = {"absolute": qc - qb, "relative": qc / qb - 1 if qb > 0 else None,
                   "relative_interval": [(lo_c / hi_b - 1) if lo_c is not None and hi_b else None,
                                         (hi_c / lo_b - 1) if hi_c is not None and lo_b else None]}
    # The test: a sequential log-rank over the tail, from the baseline's q_from-quantile up, with thresholds
    # fixed before each bucket (the baseline's warm-up and earlier buckets), so within a bucket both lanes
    # face the same predictable thresholds. A tail-only regression changes how far the canary goes on
    # once in the tail far more than how often it enters it, which a single exceedance count cannot see.
    # The null is "the canary's tail is no heavier" (no floors): the floors apply to the point estimates.
    q_from = max(0.0, 1 - TAIL_SPAN * (1 - q))
    past = np.cumsum(np.vstack([_dense(warm, width).sum(axis=0, keepdims=True), dense["baseline"]]), axis=0)[:-1]
    past_tail = np.cumsum(past[:, ::-1], axis=1)[:, ::-1]
    ready = past_tail[:, 0] >= 5 / (1 - q) if len(run.buckets) else np.zeros(0, dtype=bool)
    j_from = np.argmax(past_tail <= (1 - q_from) * past_tail[:, :1], axis=1)
    j_q = np.argmax(past_tail <= (1 - q) * past_tail[:, :1], axis=1)
    steps = np.arange(width - 1)[None, :]
    in_tail = ready[:, None] & (steps >= j_from[:, None])
    risk, surv = {}, {}
    for lane in LANES:
        t = tail[lane]
        entry = np.take_along_axis(t, j_from[:, None], axis=1)
        # step 0: entering the tail (all -> past j_from); then bin by bin inside it
        risk[lane] = np.hstack([np.where(ready, t[:, 0], 0)[:, None], np.where(in_tail, t[:, :-1], 0)])
        surv[lane] = np.hstack([np.where(ready[:, None], entry, 0), np.where(in_tail, t[:, 1:], 0)])
    log_e = tail_log_e(risk["canary"], surv["canary"], risk["baseline"], surv["baseline"])
    fixed = _tail_z(r, run.final, alphas.test * (1 - TAIL_E_SHARE), risk, surv)
    exceed = {lane: np.where(ready, np.take_along_axis(tail[lane], j_q[:, None], axis=1)[:, 0], 0) for lane in LANES}
    r["test"]["method"] = "tail log-rank"
    r["test"]["tail_from_quantile"] = q_from
    r["test"]["exceedances"] = {"canary": int(exceed["canary"].sum()), "canary_of": int(total["canary"][ready].sum()),
                                "baseline": int(exceed["baseline"].sum()),
                                "baseline_of": int(total["baseline"][ready].sum())}
    material = qc > qb * (1 + m.rel_floor) and qc - qb >= m.abs_floor
    unit = r["canary"]["unit"]
    _conclude(r, log_e, alpha, material, f"canary p{100 * q:g} {_fmt(qc)} {unit} vs baseline {_fmt(qb)} {unit}",
              f"+{_fmt(m.rel_floor, True)} and +{_fmt(m.abs_floor)} {unit}", what="tail heavier", fixed=fixed)
    if m.slo is not None:
        j_s = min(H.first_bin_at_least(m.slo * (1 + 1e-9)), width - 1)
        _slo(r, {lane: (tail[lane][:, j_s], total[lane]) for lane in LANES}, 1 - q, alphas.slo_lane,
             f"p{100 * q:g} <= {_fmt(m.slo)} {unit}")
