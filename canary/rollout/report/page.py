"""The run report: one self-contained HTML page in the run directory that an on-call engineer reads in thirty
seconds. From the top: the verdict with its one-sentence reason, the traffic it judged and the metrics it could not;
who started the run; the steps drawn to scale on a timeline (retries, interim looks, the verdict) and the probe over
the whole rollout with each step shaded; what changed (the kind's section: each broker and controller, or each
service instance, before → after, and after a rollback whether the snapshot was restored); the evidence per metric
and its path over the looks against the decision boundary; the kind's promotion; the probe's accounting per step; the
steps with their Airflow task logs; the audit log as a readable list. The spec and the snapshot follow, folded. It
needs no script and no network (plots are files beside it)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from canary.fields import format_utc
from canary.rollout.core.audit import AuditAction, AuditEntry, AuditLog
from canary.rollout.core.record import RunRecord
from canary.rollout.core.run import RunState
from canary.rollout.report.evidence_path import evidence_svg
from canary.rollout.report.html import STYLE as _STYLE
from canary.rollout.report.html import details, task_url, when
from canary.rollout.report.html import e as _e
from canary.rollout.report.html import fmt as _fmt
from canary.rollout.report.plots import PLOT, draw
from canary.rollout.report.timeline import timeline

Section = Callable[[RunRecord, list[AuditEntry]], str]


def _nothing(record: RunRecord, entries: list[AuditEntry] | None = None) -> str:
    return ""


@dataclass(frozen=True)
class KindReport:
    """What a rollout kind adds to its report (canary.rollout.broker.report.BROKER_REPORT, …): what changed on its
    nodes or instances, its promotion, and a banner line on what is still reversible."""

    changes: Section = _nothing
    promotion: Section = _nothing
    reversible: Callable[[RunRecord], str] = _nothing


_COUNTS = ("sent", "acked", "lost", "late", "duplicates", "produce_errors")


def _analysis_verdict(state: RunState) -> dict:
    analysis = state.record.verdict.analysis if state.record.verdict else None
    path = state.run_dir / analysis / "verdict.json" if analysis else None
    try:
        return json.loads(path.read_text()) if path and path.is_file() else {}
    except (OSError, ValueError):
        return {}


def _banner(record: RunRecord, metrics: list[dict], kind: KindReport) -> str:
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
            f"{_e(verdict.reason if verdict else '')}</p>{traffic}{not_judged}{kind.reversible(record)}")


def _started(record: RunRecord) -> str:
    """Who or what started the run, and its DAG run in Airflow."""
    origin = record.origin
    if origin is None:
        return ""
    run = task_url(origin)
    link = f' — <a href="{_e(run)}">its DAG run in Airflow</a>' if run else ""
    return f"<p><b>Started by</b> {_e(str(origin))}, {_e(format_utc(record.created_ms))}{link}.</p>"


def _step_rows(record: RunRecord) -> str:
    """The steps table: each step's status, attempts, time, error, and the log of the Airflow task that ran it."""
    rows = []
    for name, step in record.steps.items():
        url = task_url(record.origin, step.task) if step.task else None
        log = f'<a href="{_e(url)}">{_e(step.task)}</a>' if url else "—"
        rows.append(f"<tr><th scope='row'>{_e(name)}</th><td>{_e(step.status)}</td><td>{step.attempts}</td>"
                    f"<td>{step.took_s:.1f} s</td><td>{_e(step.error or '')}</td><td>{log}</td></tr>")
    return ("<table><tr><th scope='col'>step</th><th scope='col'>status</th><th scope='col'>attempts</th>"
            "<th scope='col'>took</th><th scope='col'>error</th><th scope='col'>task log</th></tr>"
            + "".join(rows) + "</table>")


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


def _probe_accounting(entries: Iterable[AuditEntry]) -> str:
    """The probe's messages per step: sent, acknowledged, lost, late, duplicated, failed to produce."""
    rows = []
    for e in entries:
        if isinstance(e.action, AuditAction) and e.action.is_probe and any(k in e.details for k in _COUNTS):
            rows.append(f"<tr><td>{_e(e.step)}</td><td>{_e(e.get('probe_run_id', ''))}</td>"
                        + "".join(f"<td>{_e(_fmt(e.get(k)))}</td>" for k in _COUNTS) + "</tr>")
    if not rows:
        return ""
    return ("<h2>Probe accounting</h2><table><tr><th>step</th><th>probe run</th>"
            + "".join(f"<th>{k.replace('_', ' ')}</th>" for k in _COUNTS) + "</tr>" + "".join(rows) + "</table>")


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


def write_report(state: RunState, audit: AuditLog, kind: KindReport | None = None) -> Path:
    """Writes the run's report.html in its work directory and sends it to the run storage; `kind`: the sections the
    run's kind adds (what changed, its promotion, what is still reversible)."""
    kind = kind or KindReport()
    record = state.record
    entries = audit.entries()
    analysed = _analysis_verdict(state)
    metrics = [m for m in analysed.get("metrics") or [] if isinstance(m, dict)]
    analysis = record.verdict.analysis if record.verdict else None
    link = ""
    if analysis and (state.run_dir / analysis / "report.html").exists():
        rel = (state.run_dir / analysis / "report.html").relative_to(state.run_dir)
        link = f'<p><a href="{_e(str(rel))}">The analysis report: latency distributions and time series</a></p>'
    audit_list = "".join(f"<li><b>{_e(when(e.ts_ms, record.created_ms))}</b> {_e(e.step)}: "
                         f"{_e(str(e.action))} <code>{_e(details(e))}</code></li>" for e in entries)
    snapshot = record.before.model_dump(mode="json", exclude={"leaders"}) if record.before else {}
    body = f"""<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Rollout {_e(record.run_id)}</title>
<style>{_STYLE}</style></head><body>
<h1>Rollout {_e(record.run_id)}</h1>
{_banner(record, metrics, kind)}{_started(record)}{link}
<h2>Timeline</h2>{timeline(record, entries)}{_whole_rollout(state)}
{kind.changes(record, entries)}
{_evidence(metrics, state.run_dir, analysis)}{_evidence_over_time(record, analysed)}
{kind.promotion(record, entries)}{_probe_accounting(entries)}
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
