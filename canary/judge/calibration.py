"""How the canary's brokers differed from the baseline's before the change, so the gate does not hold a broker's
usual slowness against the change.

Brokers of one cluster are not alike: one leads more partitions, shares a disk, hosts the active controller. Its
probe messages are then always a little slower, and with thousands of messages a lane comparison finds that small,
stable difference "significant" — an A/A run (no change, one broker relabelled canary) rolled back on it. The unit
that differs is the broker, and the same brokers were measured before the change: the rollout's preflight probe.
`Calibration` holds each broker's latency histograms from that run; `offset` is how much slower the canary's brokers
were than the baseline's at a quantile. The quantile test then judges the canary's estimate divided by that ratio
against the floors (difference in differences): what changed, not what was always there.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from canary.judge import histogram as H
from canary.observations import BrokerReading, Observation, Record

CALIBRATED_SOURCES = ("e2e_latency_ms", "produce_latency_ms")
# Beyond 1.5x the brokers differ too much for a short probe to say by how much; the correction stops there. It only
# ever excuses: a canary that looked faster in preflight is not held to that pace (a preflight disturbed on the
# baseline's brokers, say by a busy machine, would otherwise turn into a rollback).
MAX_RATIO = 1.5
# A pool must hold this many observations beyond the quantile (p99: 500 observations) for its estimate to count.
MIN_TAIL = 5
# The probe's first second carries its connections' setup (metadata, the first produce request), not the brokers.
SETTLE_MS = 1000


@dataclass(frozen=True)
class Offset:
    """The canary brokers' q-quantile before the change (`canary`), the baseline brokers' (`baseline`), and the
    ratio the canary's estimate is divided by (canary / baseline, within [1, MAX_RATIO])."""

    canary: float
    baseline: float
    ratio: float

    def to_dict(self) -> dict:
        return {"before_canary": self.canary, "before_baseline": self.baseline, "ratio": self.ratio}


@dataclass(frozen=True)
class Calibration:
    """hists[source][broker] = histogram (bin -> count) of the probe's latencies through partitions the broker
    led, from a run before the change; readings[metric] = the brokers' own readings then (time -> broker ->
    value), which the baseline brokers are compared with (canary.judge.brokers.before_test)."""

    hists: Mapping[str, Mapping[int, Mapping[int, int]]]
    readings: Mapping[str, Mapping[int, Mapping[int, float]]] = field(default_factory=dict)

    @classmethod
    def from_observations(cls, records: Iterable[Record]) -> Calibration:
        hists: dict[str, dict[int, dict[int, int]]] = {s: defaultdict(lambda: defaultdict(int))
                                                        for s in CALIBRATED_SOURCES}
        records = list(records)
        readings: dict[str, dict[int, dict[int, float]]] = defaultdict(lambda: defaultdict(dict))
        for reading in records:
            if isinstance(reading, BrokerReading):
                readings[reading.metric][int(reading.ts)][reading.broker] = reading.value
        led = [(r, r.leader) for r in records if isinstance(r, Observation) and r.leader is not None]
        settled = min((r.send_ts for r, _ in led), default=0.0) + SETTLE_MS
        for record, leader in led:
            if record.send_ts < settled:
                continue
            for source, value in (("e2e_latency_ms", record.e2e_latency_ms),
                                  ("produce_latency_ms", record.produce_latency_ms)):
                if value is not None and value >= 0:
                    hists[source][leader][H.bin_of(value)] += 1
        return cls({s: {b: dict(h) for b, h in by.items()} for s, by in hists.items()},
                   {m: {at: dict(v) for at, v in by.items()} for m, by in readings.items()})

    def broker_readings(self, metric: str) -> dict[int, dict[int, tuple[str, float]]]:
        """The readings of `metric` before the change, in the shape of a window's (the lane is "before")."""
        return {at: {b: ("before", v) for b, v in values.items()}
                for at, values in sorted(self.readings.get(metric, {}).items())}

    @property
    def brokers(self) -> list[int]:
        return sorted({b for by in self.hists.values() for b in by})

    def offset(self, source: str, q: float, canary: Iterable[int], baseline: Iterable[int]) -> Offset | None:
        """How the `canary` brokers' q-quantile of `source` compared with the `baseline` brokers' before the change;
        None when a pool had too few observations beyond the quantile (or either is empty)."""
        by_broker = self.hists.get(source, {})
        pools = [H.merge(by_broker.get(b, {}) for b in brokers) for brokers in (set(canary), set(baseline))]
        if any(sum(pool.values()) * (1 - q) < MIN_TAIL for pool in pools):
            return None
        before_c, before_b = (H.quantile(pool, q) for pool in pools)
        if not before_c or not before_b:
            return None
        return Offset(before_c, before_b, min(MAX_RATIO, max(1.0, before_c / before_b)))
