"""The report's timeline: the steps drawn to scale, one row each (a retried step says how many tries), the interim
looks as ticks and the verdict as a mark; an inline SVG with a text alternative."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from canary.rollout.core.audit import AuditAction, AuditEntry
from canary.rollout.core.record import RunRecord
from canary.rollout.report.html import e as _e

_COLOURS = {"done": "#1a7f37", "failed": "#cf222e", "running": "#0969da"}


def _fault_text(faults: Mapping[str, Any]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(faults.items()))


def timeline(record: RunRecord, entries: list[AuditEntry]) -> str:
    """The steps to scale, one row each (a retried step says how many tries), the interim looks as ticks and the
    verdict as a mark; an inline SVG with a text alternative."""
    steps = [(name, s) for name, s in record.steps.items() if s.started_ms is not None]
    if not steps:
        return "<p>No step has run yet.</p>"
    start = record.created_ms
    end = max([s.finished_ms or s.started_ms or start for _, s in steps] + [e.ts_ms for e in entries] + [start + 1])
    width, label, row = 900, 210, 20
    scale = (width - label - 10) / (end - start)

    def x(ts: float) -> float:
        return label + (ts - start) * scale

    parts = []
    for i, (name, s) in enumerate(steps):
        y = 20 + i * row
        finished = s.finished_ms or end
        took = (finished - (s.started_ms or start)) / 1000
        tries = f", {s.attempts} tries" if s.attempts > 1 else ""
        colour = _COLOURS.get(str(s.status), "#6e7781")
        parts.append(f'<text x="0" y="{y + 12}">{_e(name)} ({took:.0f} s{tries})</text><rect '
                     f'x="{x(s.started_ms or start):.1f}" y="{y}" '
                     f'width="{max(2.0, (finished - (s.started_ms or start)) * scale):.1f}" height="14" '
                     f'fill="{colour}"><title>{_e(name)}: {_e(s.status)}, {took:.1f} s{tries}</title></rect>')
    looks = [e for e in entries if e.action is AuditAction.INTERIM_LOOK]
    verdicts = [e for e in entries if e.action is AuditAction.VERDICT]
    bottom = 20 + len(steps) * row
    for e in looks:
        parts.append(f'<line x1="{x(e.ts_ms):.1f}" x2="{x(e.ts_ms):.1f}" y1="10" y2="{bottom}" '
                     f'stroke="#0969da" stroke-dasharray="2,3"><title>interim look: {_e(e.get("verdict", ""))}'
                     f'</title></line>')
    for e in verdicts:
        parts.append(f'<line x1="{x(e.ts_ms):.1f}" x2="{x(e.ts_ms):.1f}" y1="10" y2="{bottom}" '
                     f'stroke="#000" stroke-width="2"><title>verdict {_e(e.get("verdict", ""))}</title></line>')
    axis = f'<text x="{label}" y="{bottom + 14}">0 s</text><text x="{width - 60}" y="{bottom + 14}">' \
           f'{(end - start) / 1000:.0f} s</text>'
    faults = {k: v for k, v in (record.spec.get("fault") or {}).items() if v}  # a test's injected fault
    summary = (f"{len(steps)} steps over {(end - start) / 1000:.0f} s, {len(looks)} interim look(s)"
               + (f", the verdict at +{(verdicts[-1].ts_ms - start) / 1000:.0f} s" if verdicts else "")
               + (f", a fault injected into the canary lane throughout ({_fault_text(faults)})" if faults else ""))
    return (f'<svg role="img" aria-label="{_e(summary)}" width="{width}" height="{bottom + 22}">'
            f'<title>{_e(summary)}</title>{"".join(parts)}{axis}</svg><p>{_e(summary)}; dashed: interim looks, '
            f"solid: the verdict.</p>")
