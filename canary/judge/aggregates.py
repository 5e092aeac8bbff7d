"""The judge's input: the Spark job's aggregates, counts per lane × time bucket × metric × histogram bin
(see canary/analysis/job.py for how they are made), and the window as every metric sees it."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from canary.judge import histogram as H
from canary.judge.calibration import Calibration, Offset
from canary.judge.config import JudgeConfig
from canary.observations import LANES, NO_OUTPUT, BrokerReading, Lane

OUTCOME_PREFIX, BAD_PREFIX, BAD_LANE, BROKER_PREFIX = "outcome.", "bad.", "_bad", "broker."


# Broker readings: reading time (ms) -> broker -> (its lane, its value).
Readings = dict[int, dict[int, tuple[str, float]]]


def broker_cell(metric: str, broker: int) -> str:
    """The aggregate metric holding one broker's readings of `metric`: `broker.<metric>@<broker>`, each reading's
    value in its histogram bin (2 % resolution is finer than any floor a broker metric is judged by) under the
    reading's own time in ms rather than a time bucket: the brokers are compared reading by reading (every few
    seconds), which a time bucket would merge."""
    return f"{BROKER_PREFIX}{metric}@{broker}"


@dataclass
class Aggregates:
    """cells[(lane, metric)][bucket_start_ms][bin] = count. Metrics: `outcome.<outcome>` (bin 0),
    `partition` (bin = partition number), `leader` (bin = the leader broker's id), the histogram sources of
    canary.judge.config.SOURCES, `outputs` (a processed record's outputs, binned: bin 0 is none), and broker
    readings (`broker_cell`) under the lane of their broker.
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
            lane, bucket, metric, bin_index, count = row
            if lane == BAD_LANE:
                reason = metric.removeprefix(BAD_PREFIX)
                agg.bad[reason] = agg.bad.get(reason, 0) + int(count)
                continue
            cell = agg.cells[(lane, metric)][int(bucket)]
            cell[int(bin_index)] = cell.get(int(bin_index), 0) + int(count)
        return agg

    @classmethod
    def from_observations(cls, observations: Iterable, bucket_ms: int, bad: dict[str, int] | None = None
                          ) -> Aggregates:
        """Reference aggregation of Observation objects in plain Python (the Spark job does the same at
        scale): for tests, simulations and small interim checks without Spark. `bad`: records already excluded
        while reading, per reason (canary.observations.read_observations), counted in the verdict."""
        counts: dict[tuple, int] = defaultdict(int)
        for reason, excluded in (bad or {}).items():
            counts[(BAD_LANE, -1, BAD_PREFIX + reason, 0)] += excluded
        run_ids = set()
        for obs in observations:
            bucket = int(obs.send_ts // bucket_ms) * bucket_ms
            run_ids.add(obs.run_id)
            if isinstance(obs, BrokerReading):
                counts[(obs.lane, int(obs.ts), broker_cell(obs.metric, obs.broker), H.bin_of(obs.value))] += 1
                continue
            if (obs.receive_ts is not None and obs.receive_ts < obs.send_ts
                    or obs.ack_ts is not None and obs.ack_ts < obs.send_ts):
                counts[(BAD_LANE, bucket, BAD_PREFIX + "clock_skew", 0)] += 1
                continue
            counts[(obs.lane, bucket, OUTCOME_PREFIX + obs.outcome, 0)] += 1
            counts[(obs.lane, bucket, "partition", obs.partition)] += 1
            if obs.leader is not None:
                counts[(obs.lane, bucket, "leader", obs.leader)] += 1
            for metric, value in (("e2e_latency_ms", obs.e2e_latency_ms),
                                  ("produce_latency_ms", obs.produce_latency_ms),
                                  ("processing_ms", obs.processing_ms), ("lag", obs.lag),
                                  ("outputs", obs.outputs)):
                if value is not None:
                    counts[(obs.lane, bucket, metric, H.bin_of(value))] += 1
        return cls.from_rows([(*key, count) for key, count in counts.items()], bucket_ms, run_ids)

    def buckets(self) -> list[int]:
        """The time buckets of the messages (broker readings sit at their own times, inside these or not)."""
        return sorted({b for (lane, metric), by in self.cells.items() if lane in LANES
                       and not metric.startswith(BROKER_PREFIX) for b in by})

    def hist(self, lane: str, metric: str, bucket: int) -> dict[int, int]:
        by_bucket = self.cells.get((lane, metric))
        return by_bucket.get(bucket, {}) if by_bucket else {}

    def broker_readings(self, metric: str, start_ms: float, end_ms: float) -> Readings:
        """The readings of `metric` taken in [start_ms, end_ms): reading time -> broker -> (lane, value). One
        sampling of the brokers shares one time (canary.probe.broker_readings)."""
        prefix = f"{BROKER_PREFIX}{metric}@"
        readings: dict[int, dict[int, tuple[str, float]]] = defaultdict(dict)
        for (lane, name), by in self.cells.items():
            if name.startswith(prefix):
                for at, hist in by.items():
                    if start_ms <= at < end_ms and hist:
                        readings[at][int(name.removeprefix(prefix))] = (lane, H.quantile(hist, 0.5) or 0.0)
        return dict(sorted(readings.items()))

    def outcomes(self, lane: str, bucket: int) -> dict[str, int]:
        return {metric.removeprefix(OUTCOME_PREFIX): by.get(bucket, {}).get(0, 0)
                for (ln, metric), by in self.cells.items() if ln == lane and metric.startswith(OUTCOME_PREFIX)}


class Window:
    """The window as every metric sees it: its buckets in and after the warm-up, and per lane the trials
    (observations) and partitions of each bucket after the warm-up. `final`: the final look, else an
    interim one. `before`: the same brokers' latencies before the change (canary.judge.calibration), or None."""

    def __init__(self, agg: Aggregates, config: JudgeConfig, final: bool = True, before: Calibration | None = None):
        self.agg, self.config, self.final, self.before = agg, config, final, before
        self.all_buckets = agg.buckets()
        start = self.all_buckets[0] if self.all_buckets else 0
        self.warmup_end = start + int(config.warmup_s * 1000)
        self.warmup = [b for b in self.all_buckets if b < self.warmup_end]
        self.buckets = [b for b in self.all_buckets if b >= self.warmup_end]
        self.outcomes = {lane: [agg.outcomes(lane, b) for b in self.buckets] for lane in LANES}
        self.trials = {lane: np.array([sum(o.values()) for o in self.outcomes[lane]], dtype=float) for lane in LANES}
        self.partitions = {lane: np.array([len(agg.hist(lane, "partition", b)) for b in self.buckets], dtype=float)
                           for lane in LANES}

    def broker_readings(self, metric: str, settle_s: float = 0.0) -> Readings:
        """The brokers' readings of `metric` from `settle_s` after the warm-up (before it when negative), up to the end
        of the last bucket."""
        if not self.buckets:
            return {}
        return self.agg.broker_readings(metric, self.warmup_end + settle_s * 1000,
                                        self.buckets[-1] + self.agg.bucket_ms)

    def before_readings(self, metric: str) -> Readings:
        """The same brokers' readings of `metric` before the change (the calibration's), or none."""
        return self.before.broker_readings(metric) if self.before else {}

    def brokers(self, lane: Lane) -> set[int]:
        """The brokers that led the lane's partitions after the warm-up (the probe's messages)."""
        return {k for b in self.buckets for k in self.agg.hist(lane, "leader", b)}

    def offset(self, source: str, q: float) -> Offset | None:
        """How much slower this window's canary brokers were than its baseline brokers at the q-quantile of
        `source` before the change; None without a calibration or with too little of it."""
        if self.before is None:
            return None
        return self.before.offset(source, q, self.brokers("canary"), self.brokers("baseline"))

    def among(self, lane: Lane, which: str) -> np.ndarray:
        """Per bucket after the warm-up, the lane's observations a rate metric counts over (MetricSpec.among): all of
        them; those processed by a service (they carry a processing time); or those produced (acknowledged ones
        carry a produce latency, failed ones are produce errors)."""
        if which == "all":
            return self.trials[lane]
        if which == "processed":
            return self._counted(lane, "processing_ms")
        if which == "output_counted":
            return self._counted(lane, "outputs")
        return self._counted(lane, "produce_latency_ms") + self.events(lane, ("produce_error",))

    def _counted(self, lane: Lane, source: str) -> np.ndarray:
        return np.array([sum(self.agg.hist(lane, source, b).values()) for b in self.buckets], dtype=float)

    def events(self, lane: Lane, names: Iterable[str]) -> np.ndarray:
        """Per bucket after the warm-up, the lane's observations with one of the outcomes `names`; `no_output`: the
        records a service processed and wrote nothing for (their outputs counted, and none)."""
        names = tuple(names)
        counts = np.array([sum(o.get(name, 0) for name in names) for o in self.outcomes[lane]], dtype=float)
        if NO_OUTPUT in names:
            counts += np.array([self.agg.hist(lane, "outputs", b).get(0, 0) for b in self.buckets], dtype=float)
        return counts
