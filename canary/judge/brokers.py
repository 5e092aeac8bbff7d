"""Broker metrics: the canary brokers against the baseline brokers, reading by reading.

The unit that differs between the lanes is the broker, so the broker is the unit compared: at each reading after
the warm-up (every few seconds, all brokers at once), each broker's value of the metric. Under "the change does
not harm", the canary brokers are brokers like the others, so the worst of all the brokers is a canary broker with
probability K/(K+B) (K canary, B baseline brokers with a reading). The test counts the readings at which the worst
broker is a canary broker: a one-sample e-process on that count against K/(K+B), anytime-valid
like every other test. Brokers do differ (leadership, disks, neighbours), and a broker that is always a little
slower than the others makes that count grow under no change at all; so a FAIL also needs the effect to be
material: the canary's median deviation from the baseline brokers' median beyond the relative floor *plus* the
baseline brokers' own median deviation from it (how much the healthy brokers of this cluster differ, measured in
the same readings), and beyond the absolute floor. See canary/judge/README.md.
"""

from __future__ import annotations

import numpy as np

from canary.broker_metrics.catalogue import IDLE_SHARES, UNITS
from canary.judge.aggregates import Window
from canary.judge.config import MetricSpec
from canary.judge.evidence import check_sufficiency, conclude, format_value


def _worse(direction: str, a: float, b: float) -> bool:
    return a > b if direction == "increase" else a < b


def broker_test(window: Window, metric: MetricSpec, alpha: float, result: dict) -> None:
    """H0: at every reading the worst broker is a canary broker with probability at most K/(K+B). An idle share is
    judged as its busy share (1 - idle, regressing upwards), so its floors mean "n times busier" and "points
    busier"."""
    busy = metric.source in IDLE_SHARES
    direction = "increase" if busy else metric.direction
    worst_canary: list[float] = []
    pool: list[float] = []
    spread: list[float] = []
    x: list[float] = []
    p0s: list[float] = []
    brokers: dict[str, set[int]] = {"canary": set(), "baseline": set()}
    for values in window.broker_readings(metric.source).values():
        canary = {b: 1 - v if busy else v for b, (lane, v) in values.items() if lane == "canary"}
        baseline = {b: 1 - v if busy else v for b, (lane, v) in values.items() if lane == "baseline"}
        if not canary or not baseline:
            continue
        brokers["canary"] |= set(canary)
        brokers["baseline"] |= set(baseline)
        pick = max if direction == "increase" else min
        c, worst_b, median = pick(canary.values()), pick(baseline.values()), float(np.median(list(baseline.values())))
        worst_canary.append(c)
        pool.append(median)
        spread.append(max(abs(v - median) for v in baseline.values()))
        x.append(1.0 if _worse(direction, c, worst_b) else 0.0)
        p0s.append(len(canary) / (len(canary) + len(baseline)))
    n = len(x)
    unit = "busy share" if busy else UNITS[metric.source]
    for lane, series in (("canary", worst_canary), ("baseline", pool)):
        result[lane] = {"brokers": sorted(brokers[lane]), "readings": n, "unit": unit,
                        "value": float(np.median(series)) if series else None}
    if not check_sufficiency(result, n, n, metric, "readings of canary and baseline brokers"):
        return
    c, b, s = float(np.median(worst_canary)), float(np.median(pool)), float(np.median(spread))
    sign = 1 if direction == "increase" else -1
    absolute = sign * (c - b)   # > 0: the canary is worse
    result["baseline"]["spread"] = s   # how far the healthy brokers stray from their median (median over readings)
    result["canary"]["worst_at_readings"] = int(sum(x))
    result["effect"] = {"absolute": c - b, "relative": (c - b) / b if b else None,
                        "baseline_spread": s}
    # The relative floor is counted beyond the baseline brokers' own spread: a deviation the healthy brokers show
    # too is how this cluster's brokers differ, not the change.
    material = absolute >= metric.abs_floor and absolute - s >= metric.rel_floor * b
    log_e = _rank_log_e(np.array(x), np.array(p0s))
    word = "above" if sign > 0 else "below"
    conclude(result, log_e, alpha, material,
             f"canary broker(s) {format_value(c)} vs baseline brokers' median {format_value(b)} {unit} "
             f"(baseline brokers within {format_value(s)} of it; canary the worst broker at {int(sum(x))} of {n} "
             f"readings)",
             f"{format_value(metric.rel_floor, True)} {word} the baseline beyond its spread and "
             f"{format_value(metric.abs_floor)} {unit}",
             what="the canary is the worst broker more often than chance")


def _rank_log_e(x: np.ndarray, p0: np.ndarray) -> np.ndarray:
    """Running log e-value of 'the worst broker is a canary broker with probability <= p0 at each reading'
    (p0 may differ when brokers lack readings): a mixture over the alternatives, reading by reading."""
    if x.size == 0:
        return np.zeros(0)
    # Alternatives: the canary is the worst with probability p0 + (1 - p0) * t for t in (0, 1).
    t = np.linspace(0.05, 0.95, 19)
    pa = p0[:, None] + (1 - p0[:, None]) * t[None, :]
    steps = x[:, None] * (np.log(pa) - np.log(p0)[:, None]) + (1 - x)[:, None] * (
        np.log1p(-pa) - np.log1p(-p0)[:, None])
    cumulative = np.cumsum(steps, axis=0)
    top = cumulative.max(axis=1, keepdims=True)
    return (top + np.log(np.exp(cumulative - top).mean(axis=1, keepdims=True)))[:, 0]

