"""What a broker rollout adds to its report (canary.rollout.report): what changed on each broker and controller
through every restart, before → after, and after a rollback whether the snapshot was restored; the promotion's waves
and the look after each; what is still reversible before finalize."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from canary.judge import ROLLBACK
from canary.rollout.broker.record import BrokerRunRecord
from canary.rollout.core.audit import (
    AuditAction,
    AuditEntry,
    DrainedEntry,
    PromotionPlanEntry,
    RestartEntry,
    WaveLookEntry,
)
from canary.rollout.core.record import RunRecord, StepStatus
from canary.rollout.report import KindReport
from canary.rollout.report.html import e as _e
from canary.rollout.report.html import path_cell


def _state_cells(state: Mapping[str, Any] | None) -> dict[str, str]:
    """A broker's state as the cells the change table compares: its version, rack and each config key."""
    if not state:
        return {}
    cells = {"version": str(state.get("version")), "rack": str(state.get("rack") or "-")}
    cells |= {k: str(v) for k, v in (state.get("config") or {}).items()}
    return cells


def changes(record: RunRecord, entries: list[AuditEntry]) -> str:
    """One row per broker and controller: each key's values from the snapshot through every restart the run made
    (`before → rolled → restored`), changed keys marked; after a rollback, whether each broker is back to the
    snapshot."""
    if not isinstance(record, BrokerRunRecord) or record.before is None:
        return ""
    before = record.before
    states: dict[str, list[dict[str, str]]] = {b: [_state_cells(snap.model_dump())] for b, snap in
                                               before.brokers.items()}
    for e in entries:
        restart = e.details_as(RestartEntry) if e.action is AuditAction.RESTART_BROKER else None
        if restart is not None and restart.after is not None:
            path = states.setdefault(str(restart.broker), [])
            now = _state_cells(restart.after)
            if not path or path[-1] != now:
                path.append(now)
    canary = {str(b) for b in record.canary_brokers or ()}
    control = {str(b) for b in record.control_brokers or ()}
    rolled_back = record.status.rolled_back
    rows = []
    for broker in sorted(states, key=lambda b: int(b) if b.isdigit() else 0):
        path = states[broker]
        lane = "canary" if broker in canary else "control" if broker in control else "baseline"
        cells = []
        for key in sorted({k for state in path for k in state}):
            cells.append(path_cell([state.get(key, "—") for state in path], f"{key}: "))
        restored = ("<td>✓ restored = snapshot</td>" if path[0] == path[-1] else "<td class='FAIL'>✗ differs</td>") \
            if rolled_back else ""
        rows.append(f"<tr><th scope='row'>broker {_e(broker)}</th><td>{lane}</td><td>{'<br>'.join(cells)}</td>"
                    f"{restored}</tr>")
    for cid, controller in sorted(before.controllers.items()):
        rows.append(f"<tr><th scope='row'>controller {_e(cid)}</th><td>-</td><td>version: "
                    f"{_e(controller.version)}</td>{'<td></td>' if rolled_back else ''}</tr>")
    finalized = levels_now(record)
    features = ", ".join(f"{k}: {v} → {finalized.get(k, v)}" for k, v in sorted(before.features.items()))
    head = "<tr><th>node</th><th>lane</th><th>snapshot → each restart</th>" + (
        "<th>restored</th>" if rolled_back else "") + "</tr>"
    return (f"<h2>What changed</h2><table>{head}{''.join(rows)}</table>"
            + (f"<p><b>Feature levels:</b> {_e(features)}</p>" if features else ""))


def levels_now(record: RunRecord) -> dict[str, int]:
    """The finalized feature levels as the run last saw them: verify's reading, then what the finalize step (which
    runs after verify, once the fleet baked) raised."""
    verify, finalize = record.steps.get("verify"), record.steps.get("finalize")
    levels = dict((verify.result or {}).get("finalized") or {}) if verify else {}
    raised = (finalize.result or {}).get("finalized") if finalize and finalize.status is StepStatus.DONE else None
    levels |= {feature: pair[1] for feature, pair in (raised or {}).items()}
    return levels


def promotion(record: RunRecord, entries: list[AuditEntry]) -> str:
    """The promotion as its audit lines tell it: each wave's brokers and the look after it, what the plan said of
    the cluster before anything restarted, the partitions drained, a person's pauses."""
    plans = [e.details_as(PromotionPlanEntry) for e in entries if e.action is AuditAction.PROMOTION_PLAN]
    if not plans or not plans[-1].waves:
        return ""
    looks = {look.wave: look for look in (e.details_as(WaveLookEntry) for e in entries
                                           if e.action is AuditAction.WAVE_LOOK)}
    waves = plans[-1].waves
    rows = []
    for w in waves:
        look = looks.get(w.wave)
        against = f" (against control broker {look.control}, restarted unchanged)" if look and (
            look.control is not None) else ""
        seen = (("regression" if look.verdict == ROLLBACK else "passed") + against + ": "
                + str(look.reason or "") if look else
                "none (the last wave)" if w.wave == len(waves) else "not yet")
        brokers = ", ".join(str(b) for batch in w.batches for b in batch)
        batches = " · ".join(str(list(b)) for b in w.batches)
        rows.append(f"<tr><th scope='row'>{w.wave}</th><td>{_e(brokers)}</td><td>{_e(batches)}</td>"
                    f"<td>{_e(seen)}</td></tr>")
    drained = sum(e.details_as(DrainedEntry).drained for e in entries if e.action is AuditAction.DRAINED)
    pauses = [f"{e.action} by {e.get('by') or 'someone'}" + (f" ({e.get('reason')})" if e.get("reason") else "")
              for e in entries if e.action in (AuditAction.PAUSED, AuditAction.RESUMED)]
    notes = [f"the plan: {note}" for note in plans[-1].notes] + (
        [f"{drained} partition leadership(s) moved off batches before they stopped, and back after"]
        if drained else []) + ([f"pauses: {'; '.join(pauses)}"] if pauses else [])
    return ("<h2>Promotion</h2><table><tr><th scope='col'>wave</th><th scope='col'>brokers</th>"
            "<th scope='col'>batches</th><th scope='col'>the look after it</th></tr>" + "".join(rows) + "</table>"
            + "".join(f"<p>{_e(n)}.</p>" for n in notes))


def reversible(record: RunRecord) -> str:
    """After promote and before finalize: what can still be undone, and when finalize may run."""
    promote, finalize = record.steps.get("promote"), record.steps.get("finalize")
    pending = (promote.result or {}).get("finalize") if promote and promote.status is StepStatus.DONE else None
    if not pending or (finalize and finalize.status is StepStatus.DONE):
        return ""
    before = record.before if isinstance(record, BrokerRunRecord) else None
    features = ", ".join(f"{k} {v}" for k, v in sorted(before.features.items())) if before else ""
    return (f"<p><b>Still reversible:</b> every broker can go back to the snapshot until the feature levels are "
            f"finalized (they stay at {_e(features or 'their levels before the rollout')}); finalize "
            f"{_e(pending)}.</p>")


BROKER_REPORT = KindReport(changes=changes, promotion=promotion, reversible=reversible)
