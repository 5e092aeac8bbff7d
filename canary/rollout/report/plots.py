"""The whole rollout on one picture for the report: the probe's end-to-end latency (p99 per 10 s) in each lane and the
share of its messages that failed, from every probe the run started (preflight to verify), and where the brokers'
metrics were read, their produce request time (mean over each lane's brokers), each step shaded — what the window's
analysis plots cannot show: the deploy's restarts, the promotion's and the rollback's.

Drawn when the run is at rest (verified, waiting for a person, or stopped by a failed step), and again only when a
probe wrote since: a report is rewritten after every step, a picture costs a second or two."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path

from canary.judge.report import COLOURS, png_bytes
from canary.observations import LANES, BrokerReading, Observation, read_file_counted
from canary.rollout.core.record import RunRecord, RunStatus, StepStatus

PLOT = "rollout.png"
BUCKET_S = 10
FAILED = ("produce_error", "lost", "consume_error", "processing_error")
BROKER_METRIC = "produce_total_time_mean_ms"  # the brokers' own view of the produce path (canary.broker_metrics)


def at_rest(record: RunRecord) -> bool:
    """The run waits for nothing but a person or a fix: the picture is worth drawing."""
    return (record.status.verified or record.status is RunStatus.JUDGED_INCONCLUSIVE
            or any(s.status is StepStatus.FAILED for s in record.steps.values()))


def _p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(0.99 * len(ordered)) - 1)]


def _bucket(ts_ms: float, start_ms: float) -> int:
    return int((ts_ms - start_ms) // (BUCKET_S * 1000))


def _lane_buckets(keys: Iterable[tuple[str, int]], lane: str) -> list[int]:
    return sorted(b for (ln, b) in keys if ln == lane)


def series(observations: Iterable[Observation], start_ms: float) -> dict[str, dict[str, list[float]]]:
    """Per lane: bucket starts (s since `start_ms`), e2e p99 (ms, NaN when nothing arrived), failed share (%)."""
    latencies: dict[tuple[str, int], list[float]] = defaultdict(list)
    counts: dict[tuple[str, int], list[int]] = defaultdict(lambda: [0, 0])
    for o in observations:
        key = (o.lane, _bucket(o.send_ts, start_ms))
        counts[key][0] += 1
        counts[key][1] += o.outcome in FAILED
        if o.e2e_latency_ms is not None:
            latencies[key].append(o.e2e_latency_ms)
    out: dict[str, dict[str, list[float]]] = {}
    for lane in LANES:
        buckets = _lane_buckets(counts, lane)
        out[lane] = {"t": [b * BUCKET_S for b in buckets],
                     "p99": [_p99(latencies[(lane, b)]) if latencies[(lane, b)] else math.nan for b in buckets],
                     "failed": [100 * counts[(lane, b)][1] / counts[(lane, b)][0] for b in buckets]}
    return out


def broker_series(readings: Iterable[BrokerReading], start_ms: float) -> dict[str, dict[str, list[float]]]:
    """Per lane: bucket starts (s since `start_ms`) and the mean of BROKER_METRIC over the lane's readings."""
    values: dict[tuple[str, int], list[float]] = defaultdict(list)
    for r in readings:
        if r.metric == BROKER_METRIC:
            values[(r.lane, _bucket(r.ts, start_ms))].append(r.value)
    out: dict[str, dict[str, list[float]]] = {}
    for lane in LANES:
        buckets = _lane_buckets(values, lane)
        if buckets:
            out[lane] = {"t": [b * BUCKET_S for b in buckets],
                         "mean": [sum(values[(lane, b)]) / len(values[(lane, b)]) for b in buckets]}
    return out


def draw(record: RunRecord, run_dir: Path) -> Path | None:
    """`rollout.png` in `run_dir` when the run is at rest and its probes wrote since it was last drawn; the picture's
    path when there is one, None when no probe observed anything."""
    out = run_dir / PLOT
    files = sorted(run_dir.glob("observations-*.jsonl"))
    if not files:
        return None
    if out.exists() and (not at_rest(record) or out.stat().st_mtime >= max(f.stat().st_mtime for f in files)):
        return out
    if not at_rest(record):
        return None
    records = [r for f in files for r in read_file_counted(f)[0]]
    observations = [o for o in records if isinstance(o, Observation)]
    if not observations:
        return None
    lanes = series(observations, record.created_ms)
    brokers = broker_series((r for r in records if isinstance(r, BrokerReading)), record.created_ms)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ratios = (2, 1, 1) if brokers else (2, 1)
    fig, axes = plt.subplots(len(ratios), 1, sharex=True, figsize=(10, 1.6 * sum(ratios) + 0.6),
                             height_ratios=ratios)
    latency, failed = axes[0], axes[1]
    for lane, s in lanes.items():
        latency.plot(s["t"], s["p99"], marker=".", color=COLOURS[lane], label=f"{lane} lane")
        failed.plot(s["t"], s["failed"], marker=".", color=COLOURS[lane], label=f"{lane} lane")
    if brokers:
        for lane, s in brokers.items():
            axes[2].plot(s["t"], s["mean"], marker=".", color=COLOURS[lane], label=f"{lane} brokers")
        axes[2].set_ylabel("broker produce\ntime, mean (ms)")
        axes[2].set_ylim(bottom=0)
    shade = ("#e8e8e8", "#f6f6f6")
    spans = [(name, s.started_ms, s.finished_ms) for name, s in record.steps.items()
             if s.started_ms is not None and s.finished_ms is not None]
    for n, (name, started, finished) in enumerate(spans):
        left, right = (started - record.created_ms) / 1000, (finished - record.created_ms) / 1000
        for ax in axes:
            ax.axvspan(left, right, color=shade[n % 2], zorder=0)
        latency.annotate(name, xy=((left + right) / 2, 1.0), xycoords=("data", "axes fraction"), ha="center",
                         va="bottom", fontsize=7, rotation=30)
    latency.set_ylabel("e2e latency p99 (ms)")
    latency.set_ylim(bottom=0)
    latency.legend(loc="upper left", fontsize=8)
    failed.set_ylabel("failed (%)")
    failed.set_ylim(bottom=0, top=max(5.0, *[v for s in lanes.values() for v in s["failed"]]) * 1.1)
    axes[-1].set_xlabel(f"seconds since the run began (probe messages by send time, {BUCKET_S} s buckets)")
    out.write_bytes(png_bytes(fig))
    plt.close(fig)
    return out
