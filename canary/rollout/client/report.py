"""What a client rollout adds to its report (canary.rollout.report): each service instance's version from the
snapshot through every start and stop the run made, and after a rollback whether the fleet is back as it was; the
canary lane's partitions."""

from __future__ import annotations

from canary.rollout.client.record import ClientRunRecord
from canary.rollout.core.audit import AuditAction, AuditEntry, InstanceEntry
from canary.rollout.core.record import RunRecord
from canary.rollout.report import KindReport
from canary.rollout.report.html import e as _e
from canary.rollout.report.html import path_cell


def changes(record: RunRecord, entries: list[AuditEntry]) -> str:
    """A client rollout's instances: each one's version from the snapshot through every start and stop the run made,
    changed ones marked; after a rollback, whether the fleet is back as it was."""
    if not isinstance(record, ClientRunRecord) or record.before is None:
        return ""
    before = record.before
    paths: dict[str, list[str]] = {}
    lanes: dict[str, str] = {}
    for inst in before.instances:
        paths[inst.name] = [inst.version if inst.running else "not running"]
        lanes[inst.name] = inst.lane
    for e in entries:
        if e.action not in (AuditAction.START_INSTANCE, AuditAction.STOP_INSTANCE):
            continue
        entry = e.details_as(InstanceEntry)
        name = entry.instance
        if name:
            now = str(entry.version) if e.action is AuditAction.START_INSTANCE else "stopped"
            path = paths.setdefault(name, ["—"])
            lanes.setdefault(name, str(e.get("lane", "-")))
            if path[-1] != now:
                path.append(now)
    if not paths:
        return ""
    rolled_back = record.status.rolled_back
    rows = []
    for name, path in sorted(paths.items()):
        cell = path_cell(path)
        back = path[-1] == path[0] or (path[0] in ("—", "not running") and path[-1] == "stopped")
        restored = ("<td>✓ as before</td>" if back else "<td class='FAIL'>✗ differs</td>") if rolled_back else ""
        rows.append(f"<tr><th scope='row'>{_e(name)}</th><td>{_e(lanes.get(name, '-'))}</td><td>{cell}</td>"
                    f"{restored}</tr>")
    head = "<tr><th>instance</th><th>lane</th><th>version: snapshot → each start or stop</th>" + (
        "<th>restored</th>" if rolled_back else "") + "</tr>"
    lane = ", ".join(str(p) for p in sorted(before.lane_plan()))
    return (f"<h2>What changed</h2><table>{head}{''.join(rows)}</table>"
            + (f"<p><b>Canary lane:</b> partitions {_e(lane)} of {_e(before.topic)} while the run had it "
               f"open (replica order restored when it closed)</p>" if lane else ""))


CLIENT_REPORT = KindReport(changes=changes)
