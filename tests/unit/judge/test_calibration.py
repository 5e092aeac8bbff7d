"""The latency quantiles calibrated by the same brokers before the change: a broker that is always slower is how
brokers differ, a broker that became slower is the change."""

from __future__ import annotations

import numpy as np
import pytest

from canary.judge import Aggregates, judge
from canary.judge.calibration import MAX_RATIO, Calibration
from canary.observations import Observation

BUCKET = 10_000
LANES = {1: "canary", 2: "baseline", 3: "baseline"}


def messages(medians: dict[int, float], seconds: int, rate: int = 50, lanes=LANES, start_ms: float = 0.0,
             seed: int = 0) -> list[Observation]:
    """`rate` probe messages per second through each broker's partition for `seconds`, e2e latency log-normal
    around the broker's median (sigma 0.35, as a quiet cluster's probe), the produce latency 60 % of it."""
    rng = np.random.default_rng(seed)
    out = []
    for broker, median in medians.items():
        for i in range(seconds * rate):
            send = start_ms + i * 1000 / rate
            e2e = median * float(np.exp(rng.normal(0, 0.35)))
            out.append(Observation("run", "probe", "probe", "t", broker - 1, broker, lanes[broker], "p",
                                   f"{broker}-{i}", i, send, send + 0.6 * e2e, send + e2e, "delivered"))
    return out


def verdict(window: list[Observation], before: list[Observation] | None) -> dict:
    agg = Aggregates.from_observations(window, BUCKET)
    return judge(agg, before=Calibration.from_observations(before) if before is not None else None)


def metric(v: dict, name: str) -> dict:
    return next(m for m in v["metrics"] if m["name"] == name)


SLOWER = {1: 4.0, 2: 3.0, 3: 3.05}  # broker 1 a third slower than the others, with no change at all


def test_a_broker_that_was_always_slower_fails_the_lanes_comparison_without_calibration():
    """The A/A false alarm the calibration is for: thousands of messages make a stable per-broker difference
    significant, and it is beyond the p50 floors."""
    v = verdict(messages(SLOWER, 120, seed=1), None)
    assert metric(v, "e2e_latency_p50")["decision"] == "FAIL"
    assert v["verdict"] == "ROLLBACK"


def test_calibrated_by_the_same_brokers_before_the_change_it_passes():
    v = verdict(messages(SLOWER, 120, seed=1), messages(SLOWER, 30, seed=2, start_ms=-200_000))
    p50 = metric(v, "e2e_latency_p50")
    assert p50["decision"] == "PASS", p50["reason"]
    assert p50["test"]["significant"]  # the canary's tail is heavier: the floors, calibrated, say by how little
    assert p50["calibration"]["ratio"] == pytest.approx(4 / 3, rel=0.05)
    assert "before the change" in p50["reason"]
    assert v["verdict"] == "PROMOTE", v["reason"]
    assert v["brokers"] == {"canary": [1], "baseline": [2, 3], "calibrated_on": [1, 2, 3]}


def test_a_broker_that_became_slower_still_fails():
    became = {**SLOWER, 1: SLOWER[1] * 1.5}
    v = verdict(messages(became, 120, seed=3), messages(SLOWER, 30, seed=4, start_ms=-200_000))
    p50 = metric(v, "e2e_latency_p50")
    assert p50["decision"] == "FAIL", p50["reason"]
    assert p50["calibration"]["canary_calibrated"] == pytest.approx(4.5, rel=0.08)
    assert v["verdict"] == "ROLLBACK"


def test_the_correction_stops_at_its_limit_and_only_ever_excuses():
    """A canary broker three times slower before the change is corrected by MAX_RATIO only: brokers that far
    apart are no pace to hold a change to. A canary that was faster is held to the baseline's pace, not its own:
    a preflight disturbed on the baseline brokers must not turn into a rollback."""
    far = {1: 9.0, 2: 3.0, 3: 3.0}
    cal = Calibration.from_observations(messages(far, 20))
    assert cal.offset("e2e_latency_ms", 0.5, [1], [2, 3]).ratio == MAX_RATIO
    faster = cal.offset("e2e_latency_ms", 0.5, [2], [1, 3])
    assert faster.ratio == 1.0 and faster.canary < faster.baseline


def test_a_short_run_calibrates_the_median_but_not_the_tail():
    cal = Calibration.from_observations(messages(SLOWER, 4))  # 150 settled messages per broker
    assert cal.offset("e2e_latency_ms", 0.5, [1], [2, 3]) is not None
    assert cal.offset("e2e_latency_ms", 0.95, [1], [2, 3]) is not None
    assert cal.offset("e2e_latency_ms", 0.99, [1], [2, 3]) is None  # 1.5 beyond its p99: not an estimate
    assert cal.offset("e2e_latency_ms", 0.5, [1], [4]) is None      # a broker it never measured


def test_the_first_second_is_the_probes_own_setup_and_is_left_out():
    first = messages({1: 500.0, 2: 500.0}, 1, lanes={1: "canary", 2: "baseline"})  # connections being made
    rest = messages({1: 3.0, 2: 3.0}, 10, lanes={1: "canary", 2: "baseline"}, start_ms=1000)
    offset = Calibration.from_observations(first + rest).offset("e2e_latency_ms", 0.95, [1], [2])
    assert offset is not None and offset.canary < 10


def test_without_calibration_the_metric_says_so():
    v = verdict(messages({1: 3.0, 2: 3.0, 3: 3.0}, 60), None)
    assert metric(v, "e2e_latency_p50")["calibration"] is None
    assert v["brokers"]["calibrated_on"] is None
