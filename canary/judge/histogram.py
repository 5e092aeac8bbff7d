"""Log-spaced histogram bins shared by the Spark job (which assigns bins) and the judge (which reads them).

A value x (milliseconds, or records for lag) falls in bin 0 when x < UNIT, else in bin
1 + floor(ln(x / UNIT) / ln(BASE)); bin k >= 1 holds [lower(k), lower(k + 1)). Only bin indices
cross the boundary between Spark and Python, so both sides agree exactly on every comparison.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

UNIT = 0.01  # ms; anything below is "0"
BASE = 1.02  # 2 % relative resolution
LN_BASE = math.log(BASE)


def bin_of(x: float) -> int:
    return 0 if x < UNIT else 1 + int(math.floor(math.log(x / UNIT) / LN_BASE))


def lower(k: int) -> float:
    """Smallest value of bin k."""
    return 0.0 if k <= 0 else UNIT * BASE ** (k - 1)


def representative(k: int) -> float:
    """The value reported for bin k: its geometric middle (0 for bin 0)."""
    return 0.0 if k <= 0 else UNIT * BASE ** (k - 0.5)


def first_bin_at_least(value: float) -> int:
    """Smallest k with lower(k) >= value: X >= lower(k) implies X >= value."""
    if value <= 0:
        return 0
    k = max(1, bin_of(value))
    while lower(k) < value:
        k += 1
    return k


def quantile(hist: Mapping[int, int], q: float) -> float | None:
    """The q-quantile of a histogram (representative value of the bin holding it); None when empty."""
    total = sum(hist.values())
    if total <= 0:
        return None
    rank = q * total
    seen = 0
    for k in sorted(hist):
        seen += hist[k]
        if seen >= rank:
            return representative(k)
    return representative(max(hist))


def merge(hists) -> dict[int, int]:
    out: dict[int, int] = {}
    for h in hists:
        for k, c in h.items():
            out[k] = out.get(k, 0) + c
    return out
