"""How the evidence moved toward the decision: each tested metric's e-value at every interim look and at the final
analysis, against its boundary (1/alpha: a regression is significant once the e-value reaches it), as an inline SVG
for the report — the metrics that came closest, on a log scale."""

from __future__ import annotations

import html
import math
from collections.abc import Mapping
from typing import Any

from canary.judge import e_values
from canary.rollout.core.record import RunRecord

SHOWN = 6  # the metrics that came closest to their boundary
_PALETTE = ("#d95f02", "#1b9e77", "#7570b3", "#e7298a", "#66a61e", "#a6761d")
_W, _H, _LEFT, _TOP, _BOTTOM = 720, 230, 60, 12, 40


def paths(record: RunRecord, final: Mapping[str, Any]) -> tuple[dict[str, list[tuple[float, float]]], dict[str, float]]:
    """Per metric: [(seconds into the window, e-value)] over the looks and the final analysis (`final`, its
    verdict.json); and each metric's boundary."""
    window = record.window
    points: dict[str, list[tuple[float, float]]] = {}
    bounds: dict[str, float] = {}
    looks = [*(window.interim if window else [])]
    if window and window.stopped_early and window.stopped_early not in looks:
        looks.append(window.stopped_early)
    steps = [(look.at_s, look.evidence) for look in looks if look.at_s is not None and look.evidence]
    if window and final.get("metrics"):
        steps.append(((window.end_ms - window.start_ms) / 1000, e_values(final)))
    for at_s, found in steps:
        for name, (e, bound) in (found or {}).items():
            points.setdefault(name, []).append((at_s, e))
            bounds[name] = bound
    return points, bounds


def evidence_svg(record: RunRecord, final: Mapping[str, Any]) -> str:
    """The SVG with its caption; "" when the run has no look with evidence."""
    points, bounds = paths(record, final)
    if not points:
        return ""
    closest = sorted(points, key=lambda n: -max(e for _, e in points[n]) / bounds[n])[:SHOWN]
    t_max = max(t for n in closest for t, _ in points[n]) or 1.0
    top = math.log10(max(bounds[n] for n in closest)) + 3  # far past the boundary is drawn at the top
    logs = [min(math.log10(max(e, 1e-3)), top) for n in closest for _, e in points[n]]
    lo, hi = min(-1.0, min(logs)), max(math.log10(max(bounds[n] for n in closest)) + 0.5, max(logs))
    step = max(1, math.ceil((hi - lo) / 6))

    def x(t: float) -> float:
        return _LEFT + (_W - _LEFT - 150) * t / t_max

    def y(e: float) -> float:
        return _TOP + (_H - _TOP - _BOTTOM) * (hi - min(math.log10(max(e, 1e-3)), top)) / (hi - lo)

    parts = []
    for k in range(math.ceil(lo), math.floor(hi) + 1, step):
        parts.append(f'<line x1="{_LEFT}" x2="{_W - 150}" y1="{y(10**k):.1f}" y2="{y(10**k):.1f}" stroke="#eee"/>'
                     f'<text x="{_LEFT - 6}" y="{y(10**k) + 4:.1f}" text-anchor="end">{10**k:g}</text>')
    for t in (0.0, t_max / 2, t_max):
        parts.append(f'<text x="{x(t):.1f}" y="{_H - _BOTTOM + 14}" text-anchor="middle">{t:.0f} s</text>')
    bound = max(bounds[n] for n in closest)
    parts.append(f'<line x1="{_LEFT}" x2="{_W - 150}" y1="{y(bound):.1f}" y2="{y(bound):.1f}" stroke="#cf222e" '
                 f'stroke-dasharray="5 3"/><text x="{_W - 148}" y="{y(bound) + 4:.1f}" fill="#cf222e">'
                 f"boundary {bound:g}</text>")
    for n, name in enumerate(closest):
        colour = _PALETTE[n % len(_PALETTE)]
        line = " ".join(f"{x(t):.1f},{y(e):.1f}" for t, e in points[name])
        parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{line}"/>'
                     + "".join(f'<circle cx="{x(t):.1f}" cy="{y(e):.1f}" r="3" fill="{colour}"/>'
                               for t, e in points[name])
                     + f'<text x="{_W - 140}" y="{_TOP + 14 * (n + 2)}" fill="{colour}">{html.escape(name)}</text>')
    parts.append(f'<text x="{(_LEFT + _W - 150) / 2:.0f}" y="{_H - 6}" text-anchor="middle">seconds into the window '
                 f"(interim looks, then the final analysis)</text>"
                 f'<text x="14" y="{_H / 2:.0f}" transform="rotate(-90 14 {_H / 2:.0f})" text-anchor="middle">'
                 f"e-value (log)</text>")
    said = (f"The evidence of a regression per metric at each look, the {len(closest)} closest to their boundary: "
            + "; ".join(f"{name} {max(e for _, e in points[name]):.3g} at most (boundary {bounds[name]:g})"
                        for name in closest))
    return (f'<svg role="img" aria-label="{html.escape(said)}" width="{_W}" height="{_H}"><title>'
            f"{html.escape(said)}</title>{''.join(parts)}</svg><p>{html.escape(said)}. A metric fails once its "
            f"e-value reaches the boundary and the effect is beyond the floors.</p>")
