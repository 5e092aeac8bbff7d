"""A metric's result and the evidence behind its decision: the result (`MetricResult`, its `Decision`), whether
there is enough data, the decision from the lane comparison's e-process, and the absolute SLO guards."""

from __future__ import annotations

import math
from enum import StrEnum
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_serializer

from canary.judge.config import Direction, Kind, MetricSpec
from canary.judge.stats import one_sample_log_e


class Decision(StrEnum):
    """A metric's decision, as verdict.json (`metrics[].decision`) and the report show it."""

    PASS = "PASS"
    FAIL = "FAIL"
    NO_DATA = "NO_DATA"
    INSUFFICIENT_DATA = "INSUFFICIENT_DATA"


class MetricResult(BaseModel):
    """One metric's result: verdict.json's `metrics[]` entry (canary/judge/README.md). Frozen: each stage of the
    comparison returns a copy, and a decision is only ever changed together with its reason (`decided`).

    canary, baseline, effect, test, slo, tolerance, calibration: the JSON-able statistics each kind of metric records
    (the schema's). `calibration` is written only for a quantile whose lanes were compared (null when uncalibrated);
    `insufficient`: why a lane is below min_samples, which turns a PASS into INSUFFICIENT_DATA (not written)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    kind: Kind
    direction: Direction
    critical: bool
    must_have_data: bool
    weight: float
    decision: Decision = Decision.NO_DATA
    reason: str = ""
    canary: dict[str, Any] = {}
    baseline: dict[str, Any] = {}
    effect: dict[str, Any] = {}
    test: dict[str, Any]
    slo: dict[str, Any] | None = None
    tolerance: dict[str, Any] | None = None
    calibration: dict[str, Any] | None = None
    insufficient: str | None = Field(default=None, exclude=True)

    @classmethod
    def of(cls, metric: MetricSpec, alpha: float) -> MetricResult:
        """A metric's result before its test ran: NO_DATA, tested at `alpha`."""
        return cls(name=metric.name, kind=metric.kind, direction=metric.direction, critical=metric.critical,
                   must_have_data=metric.must_have_data, weight=metric.weight,
                   test={"e_value": None, "threshold": 1 / alpha, "alpha": alpha})

    @property
    def passed_or_failed(self) -> bool:
        """PASS or FAIL: the lanes were compared and the comparison decided."""
        return self.decision in (Decision.PASS, Decision.FAIL)

    def decided(self, decision: Decision, reason: str) -> MetricResult:
        """This result with `decision`, for `reason`."""
        return self.model_copy(update={"decision": decision, "reason": reason})

    def with_test(self, **entries: Any) -> MetricResult:
        """This result with `entries` set in its test (a key already there keeps its place)."""
        return self.model_copy(update={"test": self.test | entries})

    @model_serializer(mode="wrap")
    def _as_written(self, handler: Any) -> dict[str, Any]:
        written = handler(self)
        written["decision"] = self.decision.value
        if "calibration" not in self.model_fields_set:
            del written["calibration"]
        return written

    def to_dict(self) -> dict[str, Any]:
        """The entry verdict.json keeps (its decision a plain string)."""
        return self.model_dump()


def format_value(x: float | None, pct: bool = False) -> str:
    """A number as a reason shows it: 4 significant digits, or a percentage of 3; n/a for none."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return f"{100 * x:.3g} %" if pct else f"{x:.4g}"


def finite_or_none(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


def check_sufficiency(result: MetricResult, n_c: float, n_b: float, metric: MetricSpec,
                      unit: str) -> tuple[MetricResult, bool]:
    """The result, and whether its lanes can be compared: not (NO_DATA) when a lane has no sample (nothing to compare
    it with); a lane below min_samples is noted for the decision."""
    if n_c == 0 or n_b == 0:
        empty = "either lane" if n_c == n_b else "the canary lane" if n_c == 0 else "the baseline lane"
        return result.decided(Decision.NO_DATA, f"no {unit} in {empty} after the warm-up"), False
    if min(n_c, n_b) < metric.min_samples:
        # Too little to pass, but an anytime-valid regression is still a regression: the test runs anyway.
        short = f"{int(min(n_c, n_b))} {unit} in the smaller lane, {metric.min_samples} needed"
        return result.model_copy(update={"insufficient": short}), True
    return result, True


def conclude(result: MetricResult, log_e: np.ndarray, alpha: float, material: bool, effect_text: str,
             floor_text: str, what: str = "", fixed: str = "") -> MetricResult:
    """PASS or FAIL from the comparison's running log e-value: FAIL when significant and `material` (beyond
    the floors). what: names the tested claim when it differs from the effect itself (quantiles: the tail).
    fixed: the evidence of a significant fixed-horizon test at the final look (quantiles), else empty."""
    e_max = float(np.exp(min(log_e.max(), 700))) if log_e.size else 1.0
    by_e = bool(log_e.size > 0 and log_e.max() >= math.log(1 / alpha))  # a numpy bool is not JSON
    significant = by_e or bool(fixed)
    result = result.with_test(e_value=e_max, significant=significant)
    claim = f"{what}, " if what else ""
    evidence = f"e-value {e_max:.3g} >= {1 / alpha:.3g}" if by_e else fixed
    if significant and material:
        return result.decided(Decision.FAIL, f"{effect_text}; beyond {floor_text} ({claim}{evidence})")
    if significant:
        return result.decided(Decision.PASS, f"{effect_text}; {claim}significant but within {floor_text}")
    return result.decided(Decision.PASS, f"{effect_text}; no regression beyond {floor_text} (e-value {e_max:.3g})")


def slo_guard(result: MetricResult, series: dict[str, tuple[np.ndarray, np.ndarray]], p0: float, alpha: float,
              text: str) -> MetricResult:
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
    result = result.model_copy(update={"slo": {"guard": text, "threshold": 1 / alpha, "lanes": lanes}})
    if breached:
        return result.decided(Decision.FAIL, f"SLO breached in {', '.join(breached)} ({text}); " + result.reason)
    return result
