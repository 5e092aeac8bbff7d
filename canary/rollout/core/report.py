"""The run report: one self-contained HTML page in the run directory that an on-call engineer reads in thirty
seconds. From the top: the verdict with its one-sentence reason, the traffic it judged and the metrics it could not;
who started the run; the steps drawn to scale on a timeline (retries, interim looks, the verdict) and the probe over
the whole rollout with each step shaded; what changed on each broker and controller, before → after, and after a
rollback whether the snapshot was restored; the evidence per metric and its path over the looks against the decision
boundary; the probe's accounting per step; the steps with their Airflow task logs; the audit log as a readable list.
The spec and the snapshot follow, folded. It needs no script and no network (plots are files beside it)."""

from __future__ import annotations

import html
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import quote

from canary.fields import format_utc
from canary.rollout.core.audit import AuditLog
from canary.rollout.core.evidence_path import evidence_svg
from canary.rollout.core.record import Origin, RunRecord, StepStatus
from canary.rollout.core.rollout_plot import PLOT, draw
from canary.rollout.core.run import RunState

_STYLE = """body{font:14px/1.4 system-ui,sans-serif;margin:2em;max-width:1100px}
table{border-collapse:collapse;margin:.5em 0 1.5em}td,th{border:1px solid #ccc;padding:3px 8px;text-align:left;
vertical-align:top}th{background:#f3f3f3}.PROMOTE{background:#1a7f37}.ROLLBACK{background:#cf222e}
.INCONCLUSIVE{background:#9a6700}.verdict{color:#fff;padding:.6em 1em;font-size:1.4em;border-radius:6px}
.changed{background:#fff3c4;font-weight:600}.FAIL{color:#cf222e;font-weight:600}.NO_DATA{color:#6e7781}
code,pre{font-size:12px}ol.audit li{margin:.15em 0}svg text{font:11px system-ui,sans-serif}"""
_COLOURS = {"done": "#1a7f37", "failed": "#cf222e", "running": "#0969da"}


def _e(value: Any) -> str:
    return html.escape(value if isinstance(value, str) else json.dumps(value, default=str))


def _when(ts_ms: float, start_ms: float | None) -> str:
    """An audit entry's time as a person reads it: ISO, UTC, and how long after the run began."""
    at = format_utc(ts_ms)
    return at if start_ms is None else f"{at} (+{(ts_ms - start_ms) / 1000:.1f} s)"


def _details(entry: Mapping[str, Any], limit: int = 400) -> str:
    """An audit entry's details as `key: value` pairs (a nested value as compact JSON), cut at `limit` characters
    (the whole entry is in audit.jsonl)."""
    text = "; ".join(f"{k}: {v if isinstance(v, str | int | float) else json.dumps(v, default=str)}"
                     for k, v in entry.items() if k not in ("ts_ms", "run_id", "step", "action"))
    return text if len(text) <= limit else text[:limit] + " … (the rest in audit.jsonl)"


def _analysis_verdict(state: RunState) -> dict:
    analysis = state.record.verdict.analysis if state.record.verdict else None
    path = state.run_dir / analysis / "verdict.json" if analysis else None
    try:
        return json.loads(path.read_text()) if path and path.is_file() else {}
    except (OSError, ValueError):
        return {}


def _banner(record: RunRecord, metrics: list[dict]) -> str:
    verdict = record.verdict
    word = verdict.verdict if verdict else "NO VERDICT"
    outcome = record.outcome()
    judged = (verdict.traffic if verdict else None) or {}
    reads = judged.get("catch_up_reads")
    read_back = (f" Catch-up reads: {reads['read_mb']} MB of the user topics read back in {reads['rounds']} rounds."
                 if reads else "")
    traffic = f"<p><b>Traffic judged:</b> {_e(judged['reason'] + read_back)}</p>" if judged.get("reason") else ""
    missing = [m["name"] for m in metrics if m.get("decision") == "NO_DATA"]
    not_judged = (f"<p><b>Not judged (no data):</b> {_e(', '.join(missing))}</p>" if missing else "")
    return (f'<p class="verdict {_e(word)}">{_e(word)} — {_e(record.status)}</p>'
            f"<p><b>Outcome:</b> {_e(outcome)} (exit code {outcome.exit_code}). "
            f"{_e(verdict.reason if verdict else '')}</p>{traffic}{not_judged}{_reversible(record)}")


def _task_url(origin: Origin | None, task: str | None = None) -> str | None:
    """The Airflow UI's page of the DAG run that drove the run, or of one of its tasks (its log): a path on the
    Airflow host that serves this report."""
    if origin is None or not origin.dag_id or not origin.airflow_run_id:
        return None
    url = f"/dags/{quote(origin.dag_id, safe='')}/runs/{quote(origin.airflow_run_id, safe='')}"
    return url + (f"/tasks/{quote(task, safe='')}" if task else "")


def _started(record: RunRecord) -> str:
    """Who or what started the run, and its DAG run in Airflow."""
    origin = record.origin
    if origin is None:
        return ""
    run = _task_url(origin)
    link = f' — <a href="{_e(run)}">its DAG run in Airflow</a>' if run else ""
    return f"<p><b>Started by</b> {_e(str(origin))}, {_e(format_utc(record.created_ms))}{link}.</p>"


def _step_rows(record: RunRecord) -> str:
    """The steps table: each step's status, attempts, time, error, and the log of the Airflow task that ran it."""
    rows = []
    for name, step in record.steps.items():
        url = _task_url(record.origin, step.task) if step.task else None
        log = f'<a href="{_e(url)}">{_e(step.task)}</a>' if url else "—"
        rows.append(f"<tr><th scope='row'>{_e(name)}</th><td>{_e(step.status)}</td><td>{step.attempts}</td>"
                    f"<td>{step.took_s:.1f} s</td><td>{_e(step.error or '')}</td><td>{log}</td></tr>")
    return ("<table><tr><th scope='col'>step</th><th scope='col'>status</th><th scope='col'>attempts</th>"
            "<th scope='col'>took</th><th scope='col'>error</th><th scope='col'>task log</th></tr>"
            + "".join(rows) + "</table>")


def _reversible(record: RunRecord) -> str:
    """After promote and before finalize: what can still be undone, and when finalize may run."""
    promote, finalize = record.steps.get("promote"), record.steps.get("finalize")
    pending = (promote.result or {}).get("finalize") if promote and promote.status is StepStatus.DONE else None
    if not pending or (finalize and finalize.status is StepStatus.DONE):
        return ""
    features = ", ".join(f"{k} {v}" for k, v in sorted(((record.before or {}).get("features") or {}).items()))
    return (f"<p><b>Still reversible:</b> every broker can go back to the snapshot until the feature levels are "
            f"finalized (they stay at {_e(features or 'their levels before the rollout')}); finalize "
            f"{_e(pending)}.</p>")


def _fault_text(faults: Mapping[str, Any]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(faults.items()))


def _timeline(record: RunRecord, entries: list[dict]) -> str:
    """The steps to scale, one row each (a retried step says how many tries), the interim looks as ticks and the
    verdict as a mark; an inline SVG with a text alternative."""
    steps = [(name, s) for name, s in record.steps.items() if s.started_ms is not None]
    if not steps:
        return "<p>No step has run yet.</p>"
    start = record.created_ms
    end = max([s.finished_ms or s.started_ms or start for _, s in steps] + [e["ts_ms"] for e in entries] + [start + 1])
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
    looks = [e for e in entries if e.get("action") == "interim look"]
    verdicts = [e for e in entries if e.get("action") == "verdict"]
    bottom = 20 + len(steps) * row
    for e in looks:
        parts.append(f'<line x1="{x(e["ts_ms"]):.1f}" x2="{x(e["ts_ms"]):.1f}" y1="10" y2="{bottom}" '
                     f'stroke="#0969da" stroke-dasharray="2,3"><title>interim look: {_e(e.get("verdict", ""))}'
                     f'</title></line>')
    for e in verdicts:
        parts.append(f'<line x1="{x(e["ts_ms"]):.1f}" x2="{x(e["ts_ms"]):.1f}" y1="10" y2="{bottom}" '
                     f'stroke="#000" stroke-width="2"><title>verdict {_e(e.get("verdict", ""))}</title></line>')
    axis = f'<text x="{label}" y="{bottom + 14}">0 s</text><text x="{width - 60}" y="{bottom + 14}">' \
           f'{(end - start) / 1000:.0f} s</text>'
    faults = {k: v for k, v in (record.spec.get("fault") or {}).items() if v}  # a test's injected fault
    summary = (f"{len(steps)} steps over {(end - start) / 1000:.0f} s, {len(looks)} interim look(s)"
               + (f", the verdict at +{(verdicts[-1]['ts_ms'] - start) / 1000:.0f} s" if verdicts else "")
               + (f", a fault injected into the canary lane throughout ({_fault_text(faults)})" if faults else ""))
    return (f'<svg role="img" aria-label="{_e(summary)}" width="{width}" height="{bottom + 22}">'
            f'<title>{_e(summary)}</title>{"".join(parts)}{axis}</svg><p>{_e(summary)}; dashed: interim looks, '
            f"solid: the verdict.</p>")


def _state_cells(state: Mapping[str, Any] | None) -> dict[str, str]:
    """A broker's state as the cells the change table compares: its version, rack and each config key."""
    if not state:
        return {}
    cells = {"version": str(state.get("version")), "rack": str(state.get("rack") or "-")}
    cells |= {k: str(v) for k, v in (state.get("config") or {}).items()}
    return cells


def _path_cell(values: list[str], label: str = "") -> str:
    """A value through the run's changes, `a → b → a`, marked when it changed; the one value when it did not."""
    if len(set(values)) == 1:
        return _e(label + values[0])
    return f'<span class="changed">{_e(label + " → ".join(values))}</span>'


def _instance_changes(record: RunRecord, entries: list[dict]) -> str:
    """A client rollout's instances: each one's version from the snapshot through every start and stop the run made,
    changed ones marked; after a rollback, whether the fleet is back as it was."""
    before = record.before or {}
    paths: dict[str, list[str]] = {}
    lanes: dict[str, str] = {}
    for inst in before.get("instances") or []:
        if isinstance(inst, Mapping) and inst.get("name"):
            paths[str(inst["name"])] = [str(inst.get("version")) if inst.get("running") else "not running"]
            lanes[str(inst["name"])] = str(inst.get("lane", "-"))
    for e in entries:
        name = str(e.get("instance", ""))
        if e.get("action") in ("start instance", "stop instance") and name:
            now = str(e.get("version")) if e["action"] == "start instance" else "stopped"
            path = paths.setdefault(name, ["—"])
            lanes.setdefault(name, str(e.get("lane", "-")))
            if path[-1] != now:
                path.append(now)
    if not paths:
        return ""
    rolled_back = str(record.status).endswith("rolled_back")
    rows = []
    for name, path in sorted(paths.items()):
        cell = _path_cell(path)
        back = path[-1] == path[0] or (path[0] in ("—", "not running") and path[-1] == "stopped")
        restored = ("<td>✓ as before</td>" if back else "<td class='FAIL'>✗ differs</td>") if rolled_back else ""
        rows.append(f"<tr><th scope='row'>{_e(name)}</th><td>{_e(lanes.get(name, '-'))}</td><td>{cell}</td>"
                    f"{restored}</tr>")
    head = "<tr><th>instance</th><th>lane</th><th>version: snapshot → each start or stop</th>" + (
        "<th>restored</th>" if rolled_back else "") + "</tr>"
    lane = ", ".join(str(p) for p in sorted((before.get("lane") or {}), key=lambda p: int(p) if str(p).isdigit()
                                            else 0))
    return (f"<h2>What changed</h2><table>{head}{''.join(rows)}</table>"
            + (f"<p><b>Canary lane:</b> partitions {_e(lane)} of {_e(before.get('topic', ''))} while the run had it "
               f"open (replica order restored when it closed)</p>" if lane else ""))


def _changes(record: RunRecord, entries: list[dict]) -> str:
    """One row per broker and controller: each key's values from the snapshot through every restart the run made
    (`before → rolled → restored`), changed keys marked; after a rollback, whether each broker is back to the
    snapshot."""
    before = record.before or {}
    brokers = before.get("brokers")
    if not isinstance(brokers, Mapping):
        return _instance_changes(record, entries)
    states: dict[str, list[dict[str, str]]] = {str(b): [_state_cells(snap)] for b, snap in brokers.items()}
    for e in entries:
        if e.get("action") == "restart broker" and isinstance(e.get("after"), Mapping):
            path = states.setdefault(str(e.get("broker")), [])
            now = _state_cells(e["after"])
            if not path or path[-1] != now:
                path.append(now)
    canary = {str(b) for b in record.canary_brokers or ()}
    control = {str(b) for b in record.control_brokers or ()}
    rolled_back = str(record.status).endswith("rolled_back")
    rows = []
    for broker in sorted(states, key=lambda b: int(b) if b.isdigit() else 0):
        path = states[broker]
        lane = "canary" if broker in canary else "control" if broker in control else "baseline"
        cells = []
        for key in sorted({k for state in path for k in state}):
            cells.append(_path_cell([state.get(key, "—") for state in path], f"{key}: "))
        restored = ("<td>✓ restored = snapshot</td>" if path[0] == path[-1] else "<td class='FAIL'>✗ differs</td>") \
            if rolled_back else ""
        rows.append(f"<tr><th scope='row'>broker {_e(broker)}</th><td>{lane}</td><td>{'<br>'.join(cells)}</td>"
                    f"{restored}</tr>")
    for cid, snap in sorted((before.get("controllers") or {}).items()):
        rows.append(f"<tr><th scope='row'>controller {_e(cid)}</th><td>-</td><td>version: "
                    f"{_e(str((snap or {}).get('version')))}</td>{'<td></td>' if rolled_back else ''}</tr>")
    verify = record.steps.get("verify")
    finalized = (verify.result or {}).get("finalized") if verify else None
    features = ", ".join(f"{k}: {v} → {(finalized or {}).get(k, v)}"
                         for k, v in sorted((before.get("features") or {}).items()))
    head = "<tr><th>node</th><th>lane</th><th>snapshot → each restart</th>" + (
        "<th>restored</th>" if rolled_back else "") + "</tr>"
    return (f"<h2>What changed</h2><table>{head}{''.join(rows)}</table>"
            + (f"<p><b>Feature levels:</b> {_e(features)}</p>" if features else ""))


def _fmt(value: Any, unit: str = "") -> str:
    if isinstance(value, int | float):
        return f"{value:.4g}{' ' + unit if unit else ''}"
    return "—" if value is None else str(value)


def _evidence(metrics: list[dict], run_dir: Path, analysis: str | None) -> str:
    """Per metric: canary vs baseline, the relative effect with its interval, the decision and why; then the
    analysis report's plots (Spark engine) on this page."""
    if not metrics:
        return ""
    rows = []
    for m in metrics:
        c, b, effect = m.get("canary") or {}, m.get("baseline") or {}, m.get("effect") or {}
        rel, interval = effect.get("relative"), effect.get("relative_interval")
        shown = "—" if rel is None else f"{rel:+.1%}" + (
            f" [{interval[0]:+.1%}, {interval[1]:+.1%}]" if isinstance(interval, list) and len(interval) == 2 and
            None not in interval else "")
        decision = str(m.get("decision"))
        rows.append(f"<tr><th scope='row'>{_e(m.get('name'))}</th><td>{_e(_fmt(c.get('value'), c.get('unit', '')))}"
                    f"</td><td>{_e(_fmt(b.get('value'), b.get('unit', '')))}</td><td>{_e(shown)}</td>"
                    f"<td class='{_e(decision)}'>{_e(decision)}</td><td>{_e(m.get('reason', ''))}</td></tr>")
    plots = ""
    if analysis and (run_dir / analysis).is_dir():
        plots = "".join(f'<figure><img src="{_e(f"{analysis}/{p.name}")}" alt="{_e(p.stem.replace("_", " "))}">'
                        f"<figcaption>{_e(p.stem.replace('_', ' '))}</figcaption></figure>"
                        for p in sorted((run_dir / analysis).glob("*.png")))
    return ("<h2>Evidence</h2><table><tr><th>metric</th><th>canary</th><th>baseline</th>"
            "<th>effect [interval]</th><th>decision</th><th>why</th></tr>" + "".join(rows) + "</table>" + plots)


_COUNTS = ("sent", "acked", "lost", "late", "duplicates", "produce_errors")


def _probe_accounting(entries: Iterable[dict]) -> str:
    """The probe's messages per step: sent, acknowledged, lost, late, duplicated, failed to produce."""
    rows = []
    for e in entries:
        if "probe" in str(e.get("action")) and any(k in e for k in _COUNTS):
            rows.append(f"<tr><td>{_e(e['step'])}</td><td>{_e(e.get('probe_run_id', ''))}</td>"
                        + "".join(f"<td>{_e(_fmt(e.get(k)))}</td>" for k in _COUNTS) + "</tr>")
    if not rows:
        return ""
    return ("<h2>Probe accounting</h2><table><tr><th>step</th><th>probe run</th>"
            + "".join(f"<th>{k.replace('_', ' ')}</th>" for k in _COUNTS) + "</tr>" + "".join(rows) + "</table>")


def _promotion(entries: list[dict]) -> str:
    """The promotion as its audit lines tell it: each wave's brokers and the look after it, what the plan said of
    the cluster before anything restarted, the partitions drained, a person's pauses."""
    plans = [e for e in entries if e["action"] == "promotion plan"]
    if not plans or not plans[-1].get("waves"):
        return ""
    looks = {e.get("wave"): e for e in entries if e["action"] == "wave look"}
    waves = plans[-1]["waves"]
    rows = []
    for w in waves:
        look = looks.get(w["wave"])
        against = f" (against control broker {look['control']}, restarted unchanged)" if look and look.get(
            "control") is not None else ""
        seen = (("regression" if look.get("verdict") == "ROLLBACK" else "passed") + against + ": "
                + str(look.get("reason", "")) if look else
                "none (the last wave)" if w["wave"] == len(waves) else "not yet")
        brokers = ", ".join(str(b) for batch in w["batches"] for b in batch)
        batches = " · ".join(str(list(b)) for b in w["batches"])
        rows.append(f"<tr><th scope='row'>{w['wave']}</th><td>{_e(brokers)}</td><td>{_e(batches)}</td>"
                    f"<td>{_e(seen)}</td></tr>")
    drained = sum(int(e.get("drained") or 0) for e in entries if e["action"] == "drained")
    pauses = [f"{e['action']} by {e.get('by') or 'someone'}" + (f" ({e['reason']})" if e.get("reason") else "")
              for e in entries if e["step"] == "pause"]
    notes = [f"the plan: {note}" for note in plans[-1].get("notes") or []] + (
        [f"{drained} partition leadership(s) moved off batches before they stopped, and back after"]
        if drained else []) + ([f"pauses: {'; '.join(pauses)}"] if pauses else [])
    return ("<h2>Promotion</h2><table><tr><th scope='col'>wave</th><th scope='col'>brokers</th>"
            "<th scope='col'>batches</th><th scope='col'>the look after it</th></tr>" + "".join(rows) + "</table>"
            + "".join(f"<p>{_e(n)}.</p>" for n in notes))


def _evidence_over_time(record: RunRecord, analysed: dict) -> str:
    svg = evidence_svg(record, analysed)
    return f"<h3>The evidence over time</h3>{svg}" if svg else ""


def _whole_rollout(state: RunState) -> str:
    """The probe over the whole rollout, each step shaded (rollout_plot), when there is a picture to show."""
    try:
        picture = draw(state.record, state.run_dir)
    except (OSError, ValueError) as exc:  # the page stands without its picture
        return f"<p>No picture of the whole rollout: {_e(str(exc))}</p>"
    if picture is None:
        return ""
    said = ("The probe over the whole rollout: end-to-end latency p99 and the share of failed messages per lane, "
            "and the brokers' produce request time where it was read; 10 s buckets, each step shaded")
    return f'<figure><img src="{PLOT}" alt="{_e(said)}"><figcaption>{_e(said)}.</figcaption></figure>'


def write_report(state: RunState, audit: AuditLog) -> Path:
    record = state.record
    entries = list(audit.entries())
    analysed = _analysis_verdict(state)
    metrics = [m for m in analysed.get("metrics") or [] if isinstance(m, dict)]
    analysis = record.verdict.analysis if record.verdict else None
    link = ""
    if analysis and (state.run_dir / analysis / "report.html").exists():
        rel = (state.run_dir / analysis / "report.html").relative_to(state.run_dir)
        link = f'<p><a href="{_e(str(rel))}">The analysis report: latency distributions and time series</a></p>'
    audit_list = "".join(f"<li><b>{_e(_when(e['ts_ms'], record.created_ms))}</b> {_e(e['step'])}: "
                         f"{_e(e['action'])} <code>{_e(_details(e))}</code></li>" for e in entries)
    snapshot = {k: v for k, v in (record.before or {}).items() if k != "leaders"}
    body = f"""<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Rollout {_e(record.run_id)}</title>
<style>{_STYLE}</style></head><body>
<h1>Rollout {_e(record.run_id)}</h1>
{_banner(record, metrics)}{_started(record)}{link}
<h2>Timeline</h2>{_timeline(record, entries)}{_whole_rollout(state)}
{_changes(record, entries)}
{_evidence(metrics, state.run_dir, analysis)}{_evidence_over_time(record, analysed)}
{_promotion(entries)}{_probe_accounting(entries)}
<h2>Steps</h2>{_step_rows(record)}
<h2>Audit log</h2><p>Times in UTC, with the time since the run began.</p><ol class="audit">{audit_list}</ol>
<details><summary>Spec</summary><pre>{_e(json.dumps(record.spec, indent=2))}</pre></details>
<details><summary>Before the rollout (snapshot)</summary><pre>{_e(json.dumps(snapshot, indent=2, default=str))}</pre>
</details>
</body></html>"""
    path = state.run_dir / "report.html"
    path.write_text(body)
    state.store.push(state.run_dir)  # to the run storage, where the report pages read it
    return path
