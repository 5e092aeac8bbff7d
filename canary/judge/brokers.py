"""Broker metrics: the canary brokers against the baseline brokers, reading by reading; and the baseline brokers
against themselves before the change.

The unit that differs between the lanes is the broker, so the broker is the unit compared: at each reading after
the warm-up (every few seconds, all brokers at once), each broker's value of the metric. Under "the change does
not harm", the canary brokers are brokers like the others, so the worst of all the brokers is a canary broker with
probability K/(K+B) (K canary, B baseline brokers with a reading). The test counts the readings at which the worst
broker is a canary broker: a one-sample e-process on that count against K/(K+B), anytime-valid
like every other test. Brokers do differ (leadership, disks, neighbours), and a broker that is always a little
slower than the others makes that count grow under no change at all; so a FAIL also needs the effect to be
material: the canary's median deviation from the baseline brokers' median beyond the relative floor *plus* the
baseline brokers' own median deviation from it (how much the healthy brokers of this cluster differ, measured in
the same readings), and beyond the absolute floor.

A metric of effort (a busy share, CPU) is judged per unit of work (`per`): a broker that does less must not look
healthier for it. A change can also harm the brokers it does not run on (a canary that is a slow follower holds up
every acks=all write its leaders wait for): `compare: before` judges the baseline brokers against their own readings
before the change (the preflight probe's).

A broker just restarted works harder and slower for its first minutes than one that has run for hours. With
control brokers (`control_brokers`: baseline brokers a broker rollout restarted with nothing changed, beside the
canary) the canary brokers are compared with them, fresh with fresh, and not with every baseline broker; the
comparison with before the change leaves them out. See canary/judge/README.md.
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Callable

import numpy as np

from canary.broker_metrics.catalogue import IDLE_SHARES, UNITS, WORK
from canary.judge.aggregates import Readings, Window
from canary.judge.config import MetricSpec
from canary.judge.evidence import Decision, MetricResult, check_sufficiency, conclude, format_value


def _worse(direction: str, a: float, b: float) -> bool:
    return a > b if direction == "increase" else a < b


def _direction(metric: MetricSpec) -> str:
    """An idle share is judged as its busy share, which regresses upwards."""
    return "increase" if metric.source in IDLE_SHARES else metric.direction


def judged_unit(metric: MetricSpec) -> str:
    unit = "busy share" if metric.source in IDLE_SHARES else UNITS[metric.source]
    return f"{unit} per {WORK[metric.per].unit}" if metric.per else unit


def judged_readings(readings_of: Callable[[str], Readings], metric: MetricSpec) -> Readings:
    """The readings of `metric` as it is judged: an idle share as its busy share (1 - idle), with `per` divided
    by the broker's work at the same reading (left out where the broker did less than the work's floor), and with
    `span_s` a mean over the span."""
    busy = metric.source in IDLE_SHARES
    work = WORK[metric.per] if metric.per else None
    done = {m: readings_of(m) for m in work.metrics} if work else {}
    judged: Readings = {}
    for at, values in readings_of(metric.source).items():
        row: dict[int, tuple[str, float]] = {}
        for broker, (lane, value) in values.items():
            value = 1 - value if busy else value
            if work:
                amount = work.of({m: done[m][at][broker][1] for m in work.metrics
                                  if broker in done[m].get(at, {})})
                if amount is None or amount < work.floor:
                    continue
                value /= amount
            row[broker] = (lane, value)
        if row:
            judged[at] = row
    return _over_span(judged, metric.span_s)


def _over_span(readings: Readings, span_s: float) -> Readings:
    """Each broker's value at a reading as its mean over its readings of the last `span_s` seconds, from the first
    reading whose span the readings cover whole (a burst at the first reading would otherwise weigh as a span)."""
    if not span_s or not readings:
        return readings
    span_ms, first = span_s * 1000, next(iter(readings))
    recent: dict[int, deque[tuple[int, float]]] = defaultdict(deque)
    spanned: Readings = {}
    for at, values in readings.items():
        row: dict[int, tuple[str, float]] = {}
        for broker, (lane, value) in values.items():
            kept = recent[broker]
            kept.append((at, value))
            while kept[0][0] <= at - span_ms:
                kept.popleft()
            if at - first >= span_ms:
                row[broker] = (lane, sum(v for _, v in kept) / len(kept))
        if row:
            spanned[at] = row
    return spanned


CONTROL = "control"


def _settled(window: Window, metric: MetricSpec) -> Callable[[str], Readings]:
    """The window's readings as `metric` judges them: from its settle time after the warm-up on, the control brokers
    in a lane of their own."""
    control = set(window.config.control_brokers)

    def readings(source: str) -> Readings:
        # A spanned metric's first judged reading averages the span before it (judged_readings).
        taken = window.broker_readings(source, metric.settle_s - metric.span_s)
        if not control:
            return taken
        return {at: {b: (CONTROL if b in control and lane == "baseline" else lane, v)
                     for b, (lane, v) in values.items()} for at, values in taken.items()}
    return readings


def broker_test(window: Window, metric: MetricSpec, alpha: float, result: MetricResult) -> MetricResult:
    """H0: at every reading the worst broker is a canary broker with probability at most K/(K+B) (B: the control
    brokers when there are any, else the baseline brokers)."""
    if metric.compare == "before":
        return before_test(window, metric, alpha, result)
    reference = CONTROL if window.config.control_brokers else "baseline"
    named = "control brokers" if reference == CONTROL else "baseline brokers"
    direction = _direction(metric)
    worst_canary: list[float] = []
    pool: list[float] = []
    spread: list[float] = []
    x: list[float] = []
    p0s: list[float] = []
    brokers: dict[str, set[int]] = {"canary": set(), "baseline": set()}
    for values in judged_readings(_settled(window, metric), metric).values():
        canary = {b: v for b, (lane, v) in values.items() if lane == "canary"}
        baseline = {b: v for b, (lane, v) in values.items() if lane == reference}
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
    unit = judged_unit(metric)
    lanes = {lane: {"brokers": sorted(brokers[lane]), "readings": n, "unit": unit,
                    "value": float(np.median(series)) if series else None}
             for lane, series in (("canary", worst_canary), ("baseline", pool))}
    if reference == CONTROL:
        lanes["baseline"]["what"] = "the control brokers, restarted with nothing changed beside the canary"
    result, compared = check_sufficiency(result.model_copy(update=lanes), n, n, metric,
                                         f"readings of canary and {named}")
    if not compared:
        return result
    c, b, s = float(np.median(worst_canary)), float(np.median(pool)), float(np.median(spread))
    # The baseline's spread: how far the healthy brokers stray from their median (median over readings).
    result = result.model_copy(update={
        "baseline": lanes["baseline"] | {"spread": s},
        "canary": lanes["canary"] | {"worst_at_readings": int(sum(x))}})
    return _conclude(result, metric, direction, alpha, c, b, s, _rank_log_e(np.array(x), np.array(p0s)),
                     f"canary broker(s) {format_value(c)} vs {named}' median {format_value(b)} {unit} "
                     f"({named} within {format_value(s)} of it; canary the worst broker at {int(sum(x))} of {n} "
                     f"readings)", f"the {named}", "the canary is the worst broker more often than chance")


def before_test(window: Window, metric: MetricSpec, alpha: float, result: MetricResult) -> MetricResult:
    """H0: the baseline brokers are as they were before the change. Each reading's median over the baseline brokers
    is compared with the medians of the readings before the change (the preflight probe's, same brokers): if
    nothing changed, the readings are exchangeable, and one falls beyond every one of m readings before with
    probability at most 1/(m+1). The test counts the readings that do (a one-sample e-process, like the lane
    test's); a FAIL also needs the median shift beyond the floors plus how far the readings before strayed."""
    direction = _direction(metric)
    after = judged_readings(_settled(window, metric), metric)
    baseline = sorted({b for values in after.values() for b, (lane, _) in values.items() if lane == "baseline"})

    def medians(readings: Readings) -> list[float]:
        return [float(np.median(mine)) for values in readings.values()
                if (mine := [v for b, (_, v) in values.items() if b in baseline])]

    now, then = medians(after), medians(judged_readings(window.before_readings, metric))
    unit = judged_unit(metric)
    lanes = {key: {"brokers": baseline, "readings": len(series), "unit": unit, "what": what,
                   "value": float(np.median(series)) if series else None}
             for key, series, what in (("canary", now, "the baseline brokers during the window"),
                                       ("baseline", then, "the same brokers before the change"))}
    result = result.model_copy(update=lanes)
    if not then:
        return result.decided(Decision.NO_DATA, "no readings of the baseline brokers before the change (a preflight "
                                                "probe's) to compare with")
    result, compared = check_sufficiency(result, len(now), len(then), metric, "readings of the baseline brokers")
    if not compared:
        return result
    c, b = float(np.median(now)), float(np.median(then))
    s = float(max(abs(v - b) for v in then))
    limit = max(then) if direction == "increase" else min(then)
    x = np.array([1.0 if _worse(direction, v, limit) else 0.0 for v in now])
    # The baseline's spread: how far the readings before the change strayed from their median.
    result = result.model_copy(update={
        "baseline": lanes["baseline"] | {"spread": s},
        "canary": lanes["canary"] | {"beyond_before_at_readings": int(x.sum())}})
    return _conclude(result, metric, direction, alpha, c, b, s,
                     _rank_log_e(x, np.full(x.size, 1 / (len(then) + 1))),
                     f"baseline brokers' median {format_value(c)} vs {format_value(b)} {unit} before the change "
                     f"(readings before within {format_value(s)} of it; beyond all {len(then)} of them at "
                     f"{int(x.sum())} of {len(now)} readings)", "the same brokers before the change",
                     "the baseline brokers are worse than before the change")


def _conclude(result: MetricResult, metric: MetricSpec, direction: str, alpha: float, c: float, b: float, s: float,
              log_e: np.ndarray, effect_text: str, reference: str, what: str) -> MetricResult:
    """FAIL when the e-process is significant and the shift c - b is material: beyond the absolute floor, and beyond
    the relative floor plus the spread `s` (a deviation the reference shows by itself is not the change)."""
    sign = 1 if direction == "increase" else -1
    absolute = sign * (c - b)   # > 0: worse
    effect = {"absolute": c - b, "relative": (c - b) / b if b else None, "baseline_spread": s}
    material = absolute >= metric.abs_floor and absolute - s >= metric.rel_floor * b
    word = "above" if sign > 0 else "below"
    return conclude(result.model_copy(update={"effect": effect}), log_e, alpha, material, effect_text,
                    f"{format_value(metric.rel_floor, True)} {word} {reference} beyond its spread and "
                    f"{format_value(metric.abs_floor)} {judged_unit(metric)}", what=what)


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

