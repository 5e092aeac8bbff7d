"""The pieces every report page is made of: its style, a value escaped for HTML, a time as a person reads it, an
audit entry's details, a value through the run's changes, a number with its unit, the Airflow UI's page of a task."""

from __future__ import annotations

import html
import json
from typing import Any
from urllib.parse import quote

from canary.fields import format_utc
from canary.rollout.core.audit import AuditEntry
from canary.rollout.core.record import Origin

STYLE = """body{font:14px/1.4 system-ui,sans-serif;margin:2em;max-width:1100px}
table{border-collapse:collapse;margin:.5em 0 1.5em}td,th{border:1px solid #ccc;padding:3px 8px;text-align:left;
vertical-align:top}th{background:#f3f3f3}.PROMOTE{background:#1a7f37}.ROLLBACK{background:#cf222e}
.INCONCLUSIVE{background:#9a6700}.verdict{color:#fff;padding:.6em 1em;font-size:1.4em;border-radius:6px}
.changed{background:#fff3c4;font-weight:600}.FAIL{color:#cf222e;font-weight:600}.NO_DATA{color:#6e7781}
code,pre{font-size:12px}ol.audit li{margin:.15em 0}svg text{font:11px system-ui,sans-serif}"""


def e(value: Any) -> str:
    """`value` escaped for HTML (a value that is not text as compact JSON)."""
    return html.escape(value if isinstance(value, str) else json.dumps(value, default=str))


def when(ts_ms: float, start_ms: float | None) -> str:
    """An audit entry's time as a person reads it: ISO, UTC, and how long after the run began."""
    at = format_utc(ts_ms)
    return at if start_ms is None else f"{at} (+{(ts_ms - start_ms) / 1000:.1f} s)"


def details(entry: AuditEntry, limit: int = 400) -> str:
    """An audit entry's details as `key: value` pairs (a nested value as compact JSON), cut at `limit` characters
    (the whole entry is in audit.jsonl)."""
    text = "; ".join(f"{k}: {v if isinstance(v, str | int | float) else json.dumps(v, default=str)}"
                     for k, v in entry.details.items())
    return text if len(text) <= limit else text[:limit] + " … (the rest in audit.jsonl)"


def path_cell(values: list[str], label: str = "") -> str:
    """A value through the run's changes, `a → b → a`, marked when it changed; the one value when it did not."""
    if len(set(values)) == 1:
        return e(label + values[0])
    return f'<span class="changed">{e(label + " → ".join(values))}</span>'


def fmt(value: Any, unit: str = "") -> str:
    if isinstance(value, int | float):
        return f"{value:.4g}{' ' + unit if unit else ''}"
    return "—" if value is None else str(value)


def task_url(origin: Origin | None, task: str | None = None) -> str | None:
    """The Airflow UI's page of the DAG run that drove the run, or of one of its tasks (its log): a path on the
    Airflow host that serves this report."""
    if origin is None or not origin.dag_id or not origin.airflow_run_id:
        return None
    url = f"/dags/{quote(origin.dag_id, safe='')}/runs/{quote(origin.airflow_run_id, safe='')}"
    return url + (f"/tasks/{quote(task, safe='')}" if task else "")
