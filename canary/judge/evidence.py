"""A metric's result and the evidence behind its decision: the result skeleton, whether there is enough
data, the decision from the lane comparison's e-process, and the absolute SLO guards."""

from __future__ import annotations

import math

import numpy as np

from canary.judge.config import MetricSpec
from canary.judge.stats import one_sample_log_e

PASS, FAIL, NO_DATA, INSUFFICIENT = "PASS", "FAIL", "NO_DATA", "INSUFFICIENT_DATA"


def format_value(x: float | None, pct: bool = False) -> str:
    """A number as a reason shows it: 4 significant digits, or a percentage of 3; n/a for none."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return f"{100 * x:.3g} %" if pct else f"{x:.4g}"


def finite_or_none(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


def metric_result(metric: MetricSpec, alpha: float) -> dict:
    """A metric's result before its test ran: NO_DATA, tested at `alpha`."""
    return {"name": metric.name, "kind": metric.kind, "direction": metric.direction, "critical": metric.critical,
            "must_have_data": metric.must_have_data, "weight": metric.weight, "decision": NO_DATA, "reason": "",
            "canary": {}, "baseline": {}, "effect": {},
            "test": {"e_value": None, "threshold": 1 / alpha, "alpha": alpha}, "slo": None, "tolerance": None}


def check_sufficiency(result: dict, n_c: float, n_b: float, metric: MetricSpec, unit: str) -> bool:
    """False (NO_DATA) when a lane has no sample (nothing to compare it with); notes a lane below min_samples for
    the decision."""
    if n_c == 0 or n_b == 0:
        empty = "either lane" if n_c == n_b else "the canary lane" if n_c == 0 else "the baseline lane"
        result["decision"], result["reason"] = NO_DATA, f"no {unit} in {empty} after the warm-up"
        return False
    if min(n_c, n_b) < metric.min_samples:
        # Too little to pass, but an anytime-valid regression is still a regression: the test runs anyway.
        result["insufficient"] = f"{int(min(n_c, n_b))} {unit} in the smaller lane, {metric.min_samples} needed"
    return True


def conclude(result: dict, log_e: np.ndarray, alpha: float, material: bool, effect_text: str, floor_text: str,
             what: str = "", fixed: str = "") -> None:
    """PASS or FAIL from the comparison's running log e-value: FAIL when significant and `material` (beyond
    the floors). what: names the tested claim when it differs from the effect itself (quantiles: the tail).
    fixed: the evidence of a significant fixed-horizon test at the final look (quantiles), else empty."""
    e_max = float(np.exp(min(log_e.max(), 700))) if log_e.size else 1.0
    result["test"]["e_value"] = e_max
    by_e = bool(log_e.size > 0 and log_e.max() >= math.log(1 / alpha))  # a numpy bool is not JSON
    significant = by_e or bool(fixed)
    result["test"]["significant"] = significant
    claim = f"{what}, " if what else ""
    evidence = f"e-value {e_max:.3g} >= {1 / alpha:.3g}" if by_e else fixed
    if significant and material:
        result["decision"] = FAIL
        result["reason"] = f"{effect_text}; beyond {floor_text} ({claim}{evidence})"
    elif significant:
        result["decision"], result["reason"] = PASS, f"{effect_text}; {claim}significant but within {floor_text}"
    else:
        result["decision"] = PASS
        result["reason"] = f"{effect_text}; no regression beyond {floor_text} (e-value {e_max:.3g})"


def slo_guard(result: dict, series: dict[str, tuple[np.ndarray, np.ndarray]], p0: float, alpha: float,
              text: str) -> None:
    """series[lane] = (events, trials) per bucket; H0 per lane: share of events <= p0. A breach in either
    lane fails the metric."""
    lanes = {}
    breached = []
    for lane, (x, n) in series.items():
        log_e = one_sample_log_e(x, n, p0) if n.sum() > 0 else np.zeros(1)
        e_value = float(np.exp(min(log_e.max(), 700)))
        lanes[lane] = {"e_value": e_value, "breached": bool(log_e.max() >= math.log(1 / alpha))}
        if lanes[lane]["breached"]:
            breached.append(lane)
    result["slo"] = {"guard": text, "threshold": 1 / alpha, "lanes": lanes}
    if breached:
        result["decision"] = FAIL
        result["reason"] = f"SLO breached in {', '.join(breached)} ({text}); " + result["reason"]
