"""How much load a window should carry when the spec says `load: {rate: auto}`: measured on the cluster before any
change. The load (canary.probe.load) runs in short steps of doubling rate; the last step the cluster kept up with
(nearly every record acknowledged at the step's rate, produce p99 within a bound, nothing failed) is what it
sustains, and the window carries half of it: a real share of a broker's capacity, with headroom left. The steps stop
at the first that falls behind twice in a row (one hiccup, a GC pause or a segment roll, must not halve the load), so
the cluster is pushed to its limit for a few seconds at most, before any change.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from canary.probe.load import Load, LoadConfig

START_RATE = 250.0        # records/s per partition of the first step
MAX_RATE = 16_000.0       # never more, whatever the cluster takes
STEP_S = 3.0              # seconds per step
SHARE = 0.5               # of the sustained rate, for the window
KEPT_UP = 0.9             # acknowledged share of the step's records that counts as keeping up
MAX_P99_MS = 100.0        # a step with a slower produce p99 did not keep up
WARM_UP_S = 2.0           # the load's topic, metadata and connections being made: not judged
TRIES = 2                 # measures of a rate before it counts as one the cluster cannot keep up with


@dataclass(frozen=True)
class Step:
    rate: float            # records/s per partition asked for
    acked_per_s: float     # per partition, acknowledged
    p99_ms: float | None   # produce latency p99, the slower lane's
    kept_up: bool
    why: str = ""


@dataclass(frozen=True)
class Sizing:
    rate: float            # records/s per partition for the window (0: the first step already fell behind)
    sustained: float       # the last step kept up with
    record_size: int
    steps: list[Step] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


def judge_step(rate: float, summary: dict) -> Step:
    """Whether one step's load summary (Load.stop()) kept up with `rate`."""
    lanes = [t for t in summary["lanes"].values() if t["partitions"]]
    partitions = sum(t["partitions"] for t in lanes) or 1
    acked = sum(t["acked_per_s"] for t in lanes) / partitions
    p99s = [t["produce_latency_ms"]["p99"] for t in lanes if t["produce_latency_ms"]]
    p99 = max(p99s) if p99s else None
    failed = sum(t["failed"] for t in lanes)
    why = ("; ".join(filter(None, [
        summary.get("stopped_because") or "",
        f"{failed} record(s) failed" if failed else "",
        f"{acked:.0f} of {rate:g} records/s acknowledged" if acked < KEPT_UP * rate else "",
        f"produce p99 {p99:.0f} ms" if p99 is not None and p99 > MAX_P99_MS else "",
        "nothing acknowledged" if p99 is None else ""])))
    return Step(rate, round(acked, 1), p99, not why, why)


def size_load(config: LoadConfig, step_s: float = STEP_S, start: float = START_RATE, cap: float = MAX_RATE,
              measure: Callable[[float, float], dict] | None = None) -> Sizing:
    """The window's load rate for the cluster of `config` (its rate is ignored; its record size and client kept).
    `measure(rate, seconds)`: one step's load summary; by default one load stepped through the rates on the same
    connections, after a warm-up that is not judged (the topic, metadata and connections being made)."""
    load = None
    if measure is None:
        load = Load(LoadConfig(config.bootstrap_servers, start, config.record_size, config.client,
                               run_id=f"{config.run_id}-sizing"))
        load.start()
        time.sleep(WARM_UP_S)
        measure = functools.partial(_step, load)
    steps: list[Step] = []
    sustained = 0.0
    rate = start
    try:
        while rate <= cap:
            tries = [judge_step(rate, measure(rate, step_s))]
            while not tries[-1].kept_up and len(tries) < TRIES:
                tries.append(judge_step(rate, measure(rate, step_s)))
            steps += tries
            if not tries[-1].kept_up:
                break
            sustained = rate
            rate *= 2
    finally:
        if load is not None:
            load.stop()
    return Sizing(round(SHARE * sustained, 1), sustained, config.record_size, steps)


def _step(load: Load, rate: float, seconds: float) -> dict:
    load.set_rate(rate)
    time.sleep(seconds)
    return load.summary()
