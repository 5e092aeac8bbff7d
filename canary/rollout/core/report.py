"""The run report: one self-contained HTML page in the run directory with the verdict, the steps, the
pre-rollout snapshot and the audit log, linking to the analysis report (plots, metric table)."""

from __future__ import annotations

import html
import json
from pathlib import Path

from canary.fields import format_utc
from canary.rollout.core.audit import AuditLog
from canary.rollout.core.run import RunState

_STYLE = """body{font:14px/1.4 system-ui,sans-serif;margin:2em;max-width:1100px}
table{border-collapse:collapse;margin:.5em 0 1.5em}td,th{border:1px solid #ccc;padding:3px 8px;text-align:left;
vertical-align:top}th{background:#f3f3f3}.PROMOTE{background:#1a7f37}.ROLLBACK{background:#cf222e}
.INCONCLUSIVE{background:#9a6700}.verdict{color:#fff;padding:.6em 1em;font-size:1.4em;border-radius:6px}
code,pre{font-size:12px}"""


def _e(value) -> str:
    return html.escape(value if isinstance(value, str) else json.dumps(value, default=str))


def _when(ts_ms: float, start_ms: float | None) -> str:
    """An audit entry's time as a person reads it: ISO, UTC, and how long after the run began."""
    at = format_utc(ts_ms)
    return at if start_ms is None else f"{at} (+{(ts_ms - start_ms) / 1000:.1f} s)"


def write_report(state: RunState, audit: AuditLog) -> Path:
    record = state.record
    verdict = record.verdict
    word = verdict.verdict if verdict else "NO VERDICT"
    outcome = record.outcome()
    rows = []
    for name, step in record.steps.items():
        rows.append(f"<tr><td>{_e(name)}</td><td>{_e(step.status)}</td><td>{step.attempts}</td>"
                    f"<td>{step.took_s:.1f}s</td><td>{_e(step.error or '')}</td></tr>")
    entries = "".join(
        f"<tr><td>{_e(_when(e['ts_ms'], record.created_ms))}</td><td>{_e(e['step'])}</td><td>{_e(e['action'])}</td>"
        f"<td><code>{_e({k: v for k, v in e.items() if k not in ('ts_ms', 'run_id', 'step', 'action')})}</code></td>"
        "</tr>" for e in audit.entries())
    # The traffic the verdict judged (a broker rollout's canary share of client traffic): capacity judged or not.
    judged = (verdict.traffic if verdict else None) or {}
    traffic = f"<p><b>Traffic judged:</b> {_e(judged['reason'])}</p>" if judged.get("reason") else ""
    analysis = verdict.analysis if verdict else None
    link = ""
    if analysis and (state.run_dir / analysis / "report.html").exists():
        rel = (state.run_dir / analysis / "report.html").relative_to(state.run_dir)
        link = f'<p><a href="{_e(str(rel))}">Analysis report: latency distributions, time series, metric table</a></p>'
    body = f"""<!doctype html><html><head><meta charset="utf-8"><title>Rollout {_e(record.run_id)}</title>
<style>{_STYLE}</style></head><body>
<h1>Rollout {_e(record.run_id)}</h1>
<p class="verdict {_e(word)}">{_e(word)} — {_e(record.status)}</p>
<p><b>Outcome:</b> {_e(outcome)} (exit code {outcome.exit_code})</p>
<p>{_e(verdict.reason if verdict else '')}</p>{traffic}{link}
<h2>Steps</h2><table><tr><th>step</th><th>status</th><th>attempts</th><th>took</th><th>error</th></tr>
{''.join(rows)}</table>
<h2>Spec</h2><pre>{_e(json.dumps(record.spec, indent=2))}</pre>
<h2>Before the rollout</h2><pre>{_e(json.dumps({k: v for k, v in (record.before or {}).items()
                                                 if k != 'leaders'}, indent=2, default=str))}</pre>
<h2>Audit log</h2><table><tr><th>time (UTC, since the run began)</th><th>step</th><th>action</th><th>details</th></tr>
{entries}</table>
</body></html>"""
    path = state.run_dir / "report.html"
    path.write_text(body)
    state.store.push(state.run_dir)  # to the run storage, where the report pages read it
    return path
