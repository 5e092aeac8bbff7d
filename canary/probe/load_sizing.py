"""How much load a window carries with `load: {rate: auto}`: only what the cluster's own client traffic lacks to be
representative, never more than a ceiling per broker, and none on a cluster whose request handlers have little
headroom left. It is sized from what preflight measured before any change — each broker's client bytes in and its
request handlers' busy share, from the brokers' own metrics — so nothing is pushed to find the cluster's limit: a
production cluster is never driven to saturation to size a canary's load.

The load topic has one partition per broker, each broker its leader, so `rate` records/s per partition of
`record_size` bytes put `rate × record_size` bytes/s of client traffic on every broker (plus the replicas it follows).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from dataclasses import asdict, dataclass

TARGET_FLOORS = 2.0     # aim each broker's client bytes in at twice the representative floor: clear of it with margin
MAX_BUSY = 0.5          # no synthetic load while the busiest broker's request handlers are busier than this


@dataclass(frozen=True)
class Sizing:
    rate: float                              # records/s per partition for the window (0: none)
    record_size: int
    bytes_per_s_per_broker: float            # what the load adds to each broker: rate × record_size
    measured_bytes_in_per_s: float | None    # the median broker's client bytes in before the change (None: unread)
    busiest_handler_busy: float | None       # the busiest broker's request-handler busy share before the change
    target_bytes_per_s: float                # client bytes in per broker the window should see
    ceiling_bytes_per_s: float               # never more load per broker than this
    rule: str                                # what was decided, in one sentence

    def to_dict(self) -> dict:
        return asdict(self)


def _rate(value: float) -> str:
    return f"{value / 1e6:.2f} MB/s" if value >= 1e6 else f"{value / 1e3:.1f} kB/s"


def size_load(per_broker: Mapping[int, Mapping[str, float]], min_bytes_per_s: float, record_size: int,
              ceiling_bytes_per_s: float, required: bool = True) -> Sizing:
    """The window's load from each broker's means before the change (`bytes_in_per_s`, `request_handler_idle_ratio`):
    the client bytes in that representative traffic lacks, up to TARGET_FLOORS × `min_bytes_per_s` per broker and at
    most `ceiling_bytes_per_s`; none when the busiest broker's handlers are over MAX_BUSY busy, or when the rollout
    does not require capacity to be judged (`required` false: nothing needs representative traffic)."""
    target = TARGET_FLOORS * min_bytes_per_s
    bytes_in = [v["bytes_in_per_s"] for v in per_broker.values() if "bytes_in_per_s" in v]
    idle = [v["request_handler_idle_ratio"] for v in per_broker.values() if "request_handler_idle_ratio" in v]
    measured = statistics.median(bytes_in) if bytes_in else None
    busiest = round(1 - min(idle), 3) if idle else None

    def sized(load_bytes: float, rule: str) -> Sizing:
        rate = round(load_bytes / record_size, 1)
        return Sizing(rate, record_size, round(rate * record_size, 1), None if measured is None else round(measured, 1),
                      busiest, target, ceiling_bytes_per_s, rule)

    if not required:
        return sized(0.0, "no load: the rollout does not judge capacity (capacity: not_required)")
    if busiest is not None and busiest > MAX_BUSY:
        return sized(0.0, f"no load: the busiest broker's request handlers are {busiest:.0%} busy, over the "
                          f"{MAX_BUSY:.0%} a synthetic load may be added to")
    if measured is None:
        load = min(target, ceiling_bytes_per_s)
        return sized(load, f"{_rate(load)} per broker: the brokers' client traffic could not be read, so the load is "
                           f"twice the representative floor, within the ceiling")
    need = max(0.0, target - measured)
    if not need:
        return sized(0.0, f"no load: the brokers already take {_rate(measured)} of client bytes in each, at least "
                          f"twice the representative floor")
    load = min(need, ceiling_bytes_per_s)
    capped = " (the ceiling)" if load < need else ""
    return sized(load, f"{_rate(load)} per broker{capped}: the brokers take {_rate(measured)} of client bytes in "
                       f"each, and representative traffic with margin is {_rate(target)}")
