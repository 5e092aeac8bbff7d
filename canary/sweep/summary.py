"""One sweep's figures (observations, p50/p99 latencies, error, loss and availability shares) and how the reason,
the report and the command line print them."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from datetime import UTC, datetime

from canary.judge import histogram
from canary.judge.aggregates import OUTCOME_PREFIX
from canary.judge.config import FAILURES
from canary.observations import LANES
from canary.sweep.history import Row


def sweep_summary(rows: Iterable[Row]) -> dict:
    """One sweep's figures for the trend: observations, p50/p99 latencies (ms), error, loss and availability
    shares (both lanes pooled, over the rows given: a sweep's judged rows)."""
    outcomes: Counter = Counter()
    hists: dict[str, dict[int, int]] = {"e2e_latency_ms": {}, "produce_latency_ms": {}}
    for lane, _, metric, hist_bin, count in rows:
        if lane not in LANES:
            continue
        if metric.startswith(OUTCOME_PREFIX):
            outcomes[metric.removeprefix(OUTCOME_PREFIX)] += count
        elif metric in hists:
            hists[metric][hist_bin] = hists[metric].get(hist_bin, 0) + count
    total = sum(outcomes.values())

    def share(names) -> float | None:
        return sum(outcomes[name] for name in names) / total if total else None

    def quantile(metric: str, level: float) -> float | None:
        value = histogram.quantile(hists[metric], level)
        return None if value is None else round(value, 2)

    failures = share(FAILURES)
    return {"observations": total, "e2e_p50_ms": quantile("e2e_latency_ms", 0.5),
            "e2e_p99_ms": quantile("e2e_latency_ms", 0.99), "produce_p99_ms": quantile("produce_latency_ms", 0.99),
            "error_rate": share(("produce_error", "consume_error")), "loss_rate": share(("lost",)),
            "availability": None if failures is None else 1 - failures}


def ms_text(value: float | None) -> str:
    return "–" if value is None else f"{value:.4g} ms"


def percent_text(share: float | None) -> str:
    return "–" if share is None else f"{100 * share:.4g} %"


def when_text(ms: int | None) -> str:
    return datetime.fromtimestamp((ms or 0) / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def summary_text(summary: dict) -> str:
    """The figures in one line: `observations 1500, e2e p99 12 ms, …, availability 100 %`."""
    return ", ".join(f"{label} {text}" for label, text in (
        ("observations", summary["observations"]), ("e2e p99", ms_text(summary["e2e_p99_ms"])),
        ("produce p99", ms_text(summary["produce_p99_ms"])), ("errors", percent_text(summary["error_rate"])),
        ("lost", percent_text(summary["loss_rate"])), ("availability", percent_text(summary["availability"]))))
