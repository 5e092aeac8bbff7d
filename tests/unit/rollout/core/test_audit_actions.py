"""Every audit action is an AuditAction: no writer passes free text, no reader matches an action by a string the enum
does not hold (the library and the plugin match none by string at all), and a line reads back typed."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from canary.rollout.core.audit import AuditAction, AuditEntry, AuditLog, WaveLookEntry

ROOT = Path(__file__).resolve().parents[4]
PRODUCT = [ROOT / "canary", ROOT / "plugins"]


def _sources(*roots: Path) -> list[Path]:
    return [p for root in roots for p in root.rglob("*.py")]


def _names_action(node: ast.AST) -> bool:
    """`x["action"]`, `x.get("action")` or `x.action` itself (not a part of it: `x["action"]["name"]` is a
    migration result's, not an audit entry's)."""
    if isinstance(node, ast.Subscript):
        return isinstance(node.slice, ast.Constant) and node.slice.value == "action"
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
        return bool(node.args) and isinstance(node.args[0], ast.Constant) and node.args[0].value == "action"
    return isinstance(node, ast.Attribute) and node.attr == "action"


def _literals(node: ast.AST) -> list[str] | None:
    """The text a side of a comparison holds: one string, or a tuple, list or set of strings; None otherwise."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.Tuple | ast.List | ast.Set) and all(
            isinstance(n, ast.Constant) and isinstance(n.value, str) for n in node.elts):
        return [n.value for n in node.elts]  # type: ignore[attr-defined]
    return None


def _strings(node: ast.AST) -> list[str]:
    return [n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def _of_spec(node: ast.Attribute) -> bool:
    """`spec.action`, `run.spec.action`: a spec's choice, not an audit entry's action."""
    owner = node.value
    return (isinstance(owner, ast.Name) and owner.id == "spec") or (
        isinstance(owner, ast.Attribute) and owner.attr == "spec")


def action_matches(path: Path) -> list[tuple[int, list[str]]]:
    """Each comparison of an audit entry's action (`e["action"]`, `e.get("action")`, `e.action`) with text in
    `path`: (line, the text). A `.action` compared with text no audit action has is some other action (a spec's,
    a form's) and is left out."""
    known = {a.value for a in AuditAction}
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.Compare) or len(node.comparators) != 1:
            continue
        for side, other in ((node.left, node.comparators[0]), (node.comparators[0], node.left)):
            literals = _literals(other)
            if _names_action(side) and literals is not None:
                if isinstance(side, ast.Attribute) and (_of_spec(side) or not set(literals) & known):
                    continue
                found.append((node.lineno, literals))
    return found


def audit_writes(path: Path) -> list[tuple[int, ast.expr]]:
    """Each `….audit.record(step, action, …)` / `audit.record(…)` call's action argument in `path`."""
    calls = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "record":
            owner = node.func.value
            if ((isinstance(owner, ast.Attribute) and owner.attr == "audit")
                    or (isinstance(owner, ast.Name) and owner.id == "audit")) and len(node.args) >= 2:
                calls.append((node.lineno, node.args[1]))
    return calls


def test_no_writer_passes_free_text_as_an_action():
    free = [f"{p.relative_to(ROOT)}:{line}" for p in _sources(*PRODUCT) for line, arg in audit_writes(p)
            if _strings(arg)]
    assert not free, f"audit actions written as text, not AuditAction members: {free}"


def test_the_library_and_the_plugin_match_no_action_by_its_text():
    matched = [f"{p.relative_to(ROOT)}:{line} {lits}" for p in _sources(*PRODUCT) for line, lits in action_matches(p)]
    assert not matched, f"readers matching audit actions by string (use AuditAction): {matched}"


def test_no_test_or_bench_matches_an_action_the_enum_does_not_hold():
    known = {a.value for a in AuditAction}
    unknown = [f"{p.relative_to(ROOT)}:{line} {lits}" for p in _sources(ROOT / "tests", ROOT / "bench")
               if p != Path(__file__)
               for line, lits in action_matches(p) if set(lits) - known]
    assert not unknown, f"tests matching audit actions the enum does not hold: {unknown}"


def test_the_check_finds_a_reader_and_a_writer_that_use_text(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text('def f(run, e):\n    run.audit.record("x", "restarted brokre")\n'
                   '    return e["action"] == "restart broker" or e.get("action") in ("wave look",)\n')
    assert [line for line, _ in action_matches(bad)] == [3, 3]
    assert [line for line, arg in audit_writes(bad) if _strings(arg)] == [2]


def test_an_entry_reads_back_typed_and_an_unknown_action_stays_text(tmp_path):
    log = AuditLog(tmp_path, "r1")
    log.record("promote", AuditAction.WAVE_LOOK, wave=1, verdict="PROMOTE", promoted=[1, 2], control=None)
    (entry,) = log.entries()
    assert entry.action is AuditAction.WAVE_LOOK
    assert entry.details_as(WaveLookEntry).promoted == [1, 2]
    assert entry["action"] == "wave look" and entry["wave"] == 1
    assert log.of(AuditAction.WAVE_LOOK) == [entry] and log.of(AuditAction.DRAINED) == []
    newer = AuditEntry.of_line({"ts_ms": 1, "run_id": "r1", "step": "s", "action": "an action of a newer version"})
    assert newer.action == "an action of a newer version" and not isinstance(newer.action, AuditAction)


@pytest.mark.parametrize("action", list(AuditAction))
def test_every_action_round_trips_through_the_log(tmp_path, action):
    log = AuditLog(tmp_path, "r1")
    log.record("s", action, n=1)
    assert log.entries()[-1].action is action
