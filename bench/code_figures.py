"""The figures issue 60 asks of the code, for any checkout: modules and the largest, functions over 60 lines, pairs
of modules importing each other, audit actions written or matched as text, and subscripts of a run's snapshot or
window kept as dicts. `python bench/code_figures.py [DIR]` (default: this checkout) prints them."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOTS = ("canary", "plugins", "dags", "spark_jobs")
STATE_DICTS = ("before", "snapshot", "traffic", "load", "broker_readings")


def modules(root: Path) -> list[Path]:
    return [p for top in ROOTS for p in (root / top).rglob("*.py")]


def long_functions(paths: list[Path]) -> list[tuple[int, str]]:
    found = []
    for p in paths:
        for n in ast.walk(ast.parse(p.read_text())):
            if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.end_lineno - n.lineno + 1 > 60:
                found.append((n.end_lineno - n.lineno + 1, f"{p.name}:{n.name}"))
    return sorted(found, reverse=True)


def mutual_imports(root: Path, paths: list[Path]) -> list[tuple[str, str]]:
    names = {".".join(p.relative_to(root).with_suffix("").parts).removesuffix(".__init__"): p for p in paths}
    edges: dict[str, set[str]] = {}
    for name, p in names.items():
        for n in ast.walk(ast.parse(p.read_text())):
            targets = []
            if isinstance(n, ast.Import):
                targets = [a.name for a in n.names]
            elif isinstance(n, ast.ImportFrom) and n.module and n.level == 0:
                subs = [f"{n.module}.{a.name}" for a in n.names if f"{n.module}.{a.name}" in names]
                targets = subs + ([n.module] if len(subs) < len(n.names) else [])  # a name not a submodule
            edges.setdefault(name, set()).update(t for t in targets if t in names and t != name)
    return sorted({tuple(sorted((a, b))) for a, bs in edges.items() for b in bs if a in edges.get(b, ())})


def _action_text(node: ast.AST) -> bool:
    if isinstance(node, ast.Subscript):
        return isinstance(node.slice, ast.Constant) and node.slice.value == "action"
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
        return bool(node.args) and isinstance(node.args[0], ast.Constant) and node.args[0].value == "action"
    return False


def audit_text(paths: list[Path]) -> tuple[int, int]:
    """(reads: comparisons of an entry's action with text, or text searched in it; writes: audit.record calls whose
    action is text)."""
    reads = writes = 0
    for p in paths:
        for n in ast.walk(ast.parse(p.read_text())):
            if isinstance(n, ast.Compare) and any(_action_text(s) or (
                    isinstance(s, ast.Call) and s.args and _action_text(s.args[0])) for s in [n.left, *n.comparators]):
                reads += 1
            if (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "record"
                    and len(n.args) >= 2 and any(isinstance(c, ast.Constant) and isinstance(c.value, str)
                                                 for c in ast.walk(n.args[1]))):
                owner = n.func.value
                if (isinstance(owner, ast.Attribute) and owner.attr == "audit") or (
                        isinstance(owner, ast.Name) and owner.id == "audit"):
                    writes += 1
    return reads, writes


def state_subscripts(paths: list[Path]) -> int:
    """Subscripts and .get() of a run's snapshot or window details held as a dict (`before["brokers"]`,
    `snapshot["lane"]`, `(record.before or {}).get(…)`, `window.traffic["reason"]`)."""
    def held(node: ast.AST) -> bool:
        while isinstance(node, ast.BoolOp):
            node = node.values[0]
        return (isinstance(node, ast.Name) and node.id in STATE_DICTS) or (
            isinstance(node, ast.Attribute) and node.attr in STATE_DICTS)
    count = 0
    for p in paths:
        if "rollout" not in p.parts:
            continue
        for n in ast.walk(ast.parse(p.read_text())):
            subscript = isinstance(n, ast.Subscript) and held(n.value) and isinstance(n.slice, ast.Constant)
            get = (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "get"
                   and held(n.func.value))
            count += subscript or get
    return count


def main(argv: list[str]) -> None:
    root = Path(argv[1] if len(argv) > 1 else ".").resolve()
    paths = modules(root)
    sizes = sorted(((len(p.read_text().splitlines()), p.relative_to(root).as_posix()) for p in paths), reverse=True)
    core = sum(n for n, name in sizes if name.startswith("canary/rollout/core/"))
    reads, writes = audit_text(paths)
    print(f"modules: {len(paths)}; largest: {sizes[0][1]} {sizes[0][0]} lines; over 400 lines: "
          f"{sum(1 for n, _ in sizes if n > 400)}; canary/rollout/core: {core} lines")
    longs = long_functions(paths)
    print(f"functions over 60 lines: {len(longs)} {longs}")
    pairs = mutual_imports(root, paths)
    print(f"modules importing each other: {len(pairs)} {pairs}")
    print(f"audit actions read by their text: {reads}; written as text: {writes}")
    print(f"subscripts of a run's snapshot or window details held as dicts: {state_subscripts(paths)}")


if __name__ == "__main__":
    main(sys.argv)
