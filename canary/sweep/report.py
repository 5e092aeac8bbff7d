"""report.html of one sweep: the verdict and why, this sweep against the reference metric by metric, the SLO
guards, the trend; it links to the judge's own report of the comparison."""

from __future__ import annotations

import html
from pathlib import Path

from canary.judge.report import effect_text, img_tag, lane_value
from canary.sweep.decide import relabel
from canary.sweep.history import SCHEMA_VERSION
from canary.sweep.result import RESULT_SCHEMA, SweepResult
from canary.sweep.summary import summary_text, when_text
from canary.sweep.trend import UNKNOWN_COLOUR, VERDICT_COLOURS

_STYLE = """body{font:14px/1.4 system-ui,sans-serif;margin:2em;max-width:1200px}table{border-collapse:collapse}
td,th{border:1px solid #ccc;padding:3px 8px;text-align:left;vertical-align:top;font-size:90%}th{background:#f3f3f3}
.verdict{color:#fff;padding:.6em 1em;font-size:1.4em;border-radius:6px}"""


def _comparison_table(comparison: dict | None) -> str:
    """This sweep against the reference, metric by metric, in the sweep's words."""
    if not comparison:
        return ""
    rows = "".join(
        f"<tr><td>{html.escape(metric['name'])}</td><td>{html.escape(metric['decision'])}</td>"
        f"<td>{lane_value(metric['canary'])}</td><td>{lane_value(metric['baseline'])}</td>"
        f"<td>{effect_text(metric['effect'])}</td><td>{html.escape(relabel(metric['reason']))}</td></tr>"
        for metric in comparison.get("metrics", []))
    return ("<h2>This sweep against the reference</h2><table><tr><th>metric</th><th>decision</th>"
            "<th>this sweep</th><th>reference</th><th>change</th><th>reason</th></tr>" + rows +
            '</table><p><a href="comparison/report.html">The judge\'s report of the comparison</a> (lane '
            "<i>canary</i> = this sweep, <i>baseline</i> = the reference)</p>")


def _guard_table(guards: dict | None) -> str:
    """The SLO guards, each judged on this sweep alone."""
    rows = "".join(
        f"<tr><td>{html.escape(metric['name'])}</td><td>{html.escape(metric['slo']['guard'])}</td>"
        f"<td>{lane_value(metric['canary'])}</td>"
        f"<td>{'BREACHED' if metric['slo']['lanes']['canary']['breached'] else 'ok'}</td>"
        f"<td>{metric['slo']['lanes']['canary']['e_value']:.3g}</td></tr>"
        for metric in (guards or {}).get("metrics", []) if metric.get("slo"))
    if not rows:
        return ""
    return ("<h2>SLO guards (this sweep alone)</h2><table><tr><th>metric</th><th>guard</th><th>this sweep"
            "</th><th>state</th><th>e-value</th></tr>" + rows + "</table>")


def write_report(out: Path, result: SweepResult, trend_png: bytes | None, comparison: dict | None,
                 guards: dict | None) -> Path:
    """report.html: the verdict and why, this sweep against the reference metric by metric, the SLO guards,
    the trend; links to the judge's comparison report."""
    escape = html.escape
    colour = VERDICT_COLOURS.get(result.verdict, UNKNOWN_COLOUR)
    sweep_id, started = escape(result.sweep_id), escape(when_text(result.started_ms))
    during_rollout = " (during a rollout: read-only probe)" if result.during_rollout else ""
    reference = ", ".join(result.reference) or "none"
    image = (f"<h2>Trend</h2>{img_tag(trend_png, 'trend')}"
             '<p><a href="trend.json">trend.json</a></p>') if trend_png else ""
    page = f"""<!doctype html><html lang="en"><head><meta charset="utf-8">
<title>{escape(result.cluster)}: {escape(result.verdict)}</title><style>{_STYLE}</style></head><body>
<h1>Health sweep of {escape(result.cluster)}</h1>
<p class="verdict" style="background:{colour}">{escape(result.verdict)}</p>
<p><b>{escape(result.reason)}</b></p>
<p>Sweep {sweep_id} at {started}, {result.duration_s:g} s of probe traffic at
{result.rate:g} msg/s per partition on {escape(result.bootstrap_servers)}{during_rollout}: \
{escape(summary_text(result.summary))}.</p>
<p>Reference: {escape(reference)}.</p>
{_comparison_table(comparison)}{_guard_table(guards)}{image}
<p style="color:#666">result schema {RESULT_SCHEMA} v{SCHEMA_VERSION}; details in result.json</p></body></html>"""
    path = out / "report.html"
    path.write_text(page)
    return path
