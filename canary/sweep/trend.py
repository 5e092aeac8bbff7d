"""A cluster's trend: the figures of its last sweeps (trend.json) and their plot (trend.png)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from canary.judge import INCONCLUSIVE
from canary.judge.report import png_bytes
from canary.sweep.config import DEGRADED, HEALTHY
from canary.sweep.history import HistoryStore
from canary.sweep.summary import sweep_summary

VERDICT_COLOURS = {HEALTHY: "#1a7f37", DEGRADED: "#cf222e", INCONCLUSIVE: "#9a6700", None: "#777777"}
UNKNOWN_COLOUR = "#777777"

# Each panel: its title and its series (summary key, label, scale, line colour, marker shape).
_PANELS = (("p99 latency (ms)", (("e2e_p99_ms", "end to end", 1.0, "#1f77b4", "o"),
                                 ("produce_p99_ms", "produce", 1.0, "#7f7f7f", "s"))),
           ("errors and loss (%)", (("error_rate", "produce + consume errors", 100.0, "#1f77b4", "o"),
                                    ("loss_rate", "lost", 100.0, "#7f7f7f", "s"))),
           ("availability (%)", (("availability", "availability", 100.0, "#1f77b4", "o"),)))


class TrendPoint(BaseModel):
    """One sweep in the trend (an entry of trend.json's `sweeps`): id, time, verdict, and beside them its summary
    figures (canary.sweep.summary: observations, e2e_p99_ms, error_rate, ...)."""

    model_config = ConfigDict(extra="allow")

    sweep_id: str
    started_ms: int | None
    verdict: str | None
    first_sweep: bool
    during_rollout: bool

    def figure(self, key: str) -> Any:
        """A summary figure (None when the sweep had none)."""
        return (self.model_extra or {}).get(key)


def trend(store: HistoryStore, count: int) -> list[TrendPoint]:
    """The last `count` sweeps of the cluster, oldest first: id, time, verdict and summary figures."""
    points = []
    for entry in store.entries()[-count:]:
        summary = entry.meta.get("summary") or sweep_summary(store.load(entry).judged_rows())
        points.append(TrendPoint(sweep_id=entry.sweep_id, started_ms=entry.meta.get("started_ms"),
                                 verdict=entry.verdict, first_sweep=bool(entry.meta.get("first_sweep")),
                                 during_rollout=bool(entry.meta.get("during_rollout")), **summary))
    return points


def plot_trend(points: list[TrendPoint], path: Path, cluster: str) -> bytes:
    """trend.png: per sweep the p99 latencies, error and loss rates and availability; markers coloured by the
    sweep's verdict. Returns the PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    times = [datetime.fromtimestamp((point.started_ms or 0) / 1000, UTC) for point in points]
    colours = [VERDICT_COLOURS.get(point.verdict, UNKNOWN_COLOUR) for point in points]

    def series(key: str, scale: float = 1.0) -> list[float]:
        return [float("nan") if point.figure(key) is None else point.figure(key) * scale for point in points]

    fig, axes = plt.subplots(1, 3, figsize=(14, 3.6))
    # Each series its line colour and marker shape; each sweep's marker filled with the colour of its verdict.
    for ax, (title, lines) in zip(axes, _PANELS, strict=True):
        for key, label, scale, line_colour, marker in lines:
            values = series(key, scale)
            ax.plot(times, values, "-", color=line_colour, linewidth=1, zorder=1, label=label)
            ax.scatter(times, values, c=colours, edgecolors=line_colour, marker=marker, s=28, zorder=2)
        ax.set_title(title)
        if title.startswith("p99") and all(value > 0 for value in series("e2e_p99_ms")):
            ax.set_yscale("log")  # a degraded sweep's seconds would flatten the healthy milliseconds
        ax.tick_params(axis="x", labelrotation=30, labelsize=8)
        if len(lines) > 1:
            ax.legend(fontsize=8)
    fig.suptitle(f"{cluster}: last {len(points)} sweep(s); markers green healthy, red degraded, amber inconclusive",
                 fontsize=10, y=1.03)
    png = png_bytes(fig)
    plt.close(fig)
    path.write_bytes(png)
    return png
