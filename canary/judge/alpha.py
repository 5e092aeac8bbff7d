"""The false-rollback budget alpha, split over the metrics and, within a metric, over its tests.

Bonferroni: alpha is split over the metrics that have data at all (whether a run carries client fields
is fixed by its kind, not by the comparison) in proportion to max(weight, MIN_ALPHA_WEIGHT), so the
metrics that matter most get the most power; a metric with an SLO guard gives SLO_SHARE (a tenth) of its
share to the guard, a twentieth per lane, and half of the rest to the canary's tolerance guard when it has
one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from canary.judge.config import MetricSpec

MIN_ALPHA_WEIGHT = 0.25
SLO_SHARE = 0.1


def alpha_weight(metric: MetricSpec) -> float:
    return max(metric.weight, MIN_ALPHA_WEIGHT)


def count_tests(metric: MetricSpec) -> int:
    """The metric's tests: the lane comparison, one SLO guard per lane, the tolerance guard."""
    return 1 + (2 if metric.slo is not None else 0) + (1 if metric.tolerance is not None else 0)


def metric_shares(alpha: float, active: Sequence[MetricSpec], with_data: Sequence[MetricSpec]) -> dict[str, float]:
    """Each active metric's share of `alpha`, split over those `with_data` (all of alpha when none has weight)."""
    total_weight = sum(alpha_weight(m) for m in with_data)
    return {m.name: alpha * alpha_weight(m) / total_weight if total_weight else alpha for m in active}


@dataclass(frozen=True)
class Alphas:
    """One metric's share of alpha, split over its tests: the lane comparison, each lane's SLO guard and
    the canary's tolerance guard."""

    test: float
    slo_lane: float
    tolerance: float

    @classmethod
    def split(cls, metric: MetricSpec, share: float) -> Alphas:
        slo = SLO_SHARE if metric.slo is not None else 0.0
        tolerance = (1 - slo) / 2 if metric.tolerance is not None else 0.0
        return cls(test=share * (1 - slo - tolerance), slo_lane=share * slo / 2, tolerance=share * tolerance)
