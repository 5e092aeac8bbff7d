"""The house style's limits on the code's shape, checked on the source itself: modules of at most 400 lines, functions
of at most 60, and no two modules that import each other (the layers only point down, inside a package too)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SOURCES = ("canary", "plugins", "dags", "spark_jobs")  # every Python file under these is held to the sizes
IMPORT_ROOTS = {"canary": REPO / "canary", "kafka_canary_provider": REPO / "plugins" / "kafka_canary_provider"}
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60


def _python_files(folders: tuple[str, ...]) -> list[Path]:
    return sorted(path for folder in folders for path in (REPO / folder).rglob("*.py"))


def _shown(path: Path) -> str:
    return path.relative_to(REPO).as_posix()


def _modules() -> dict[str, Path]:
    """Every module of the library and the provider by its dotted name (a package by its __init__.py)."""
    found = {}
    for package, root in IMPORT_ROOTS.items():
        for path in root.rglob("*.py"):
            parts = [package, *path.relative_to(root).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _imported(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The modules of `modules` that module `name` (at `path`) imports, wherever the import stands (a function's
    body and `if TYPE_CHECKING:` too: both are an edge of the graph); `from X import Y` names the submodule X.Y
    where there is one, else X."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]

    def known(dotted: str) -> str | None:
        while dotted and dotted not in modules:
            dotted = dotted.rpartition(".")[0]
        return dotted or None

    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {known(alias.name) for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[:len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, *([base] if base else [])])
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                found.add(submodule if submodule in modules else known(base))
    return {module for module in found if module is not None and module != name}


def test_no_module_is_over_400_lines():
    over = []
    for path in _python_files(SOURCES):
        lines = len(path.read_text().splitlines())
        if lines > MAX_MODULE_LINES:
            over.append(f"{_shown(path)}: {lines} lines")
    assert not over, f"modules over {MAX_MODULE_LINES} lines (split along a seam, one job each):\n" + "\n".join(over)


def test_no_function_is_over_60_lines():
    over = []
    for path in _python_files(SOURCES):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                assert node.end_lineno is not None
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    over.append(f"{_shown(path)}:{node.lineno} {node.name}: {lines} lines")
    assert not over, f"functions over {MAX_FUNCTION_LINES} lines:\n" + "\n".join(over)


def test_no_two_modules_import_each_other():
    modules = _modules()
    graph = {name: _imported(name, path, modules) for name, path in modules.items()}
    pairs = sorted({tuple(sorted((a, b))) for a, targets in graph.items() for b in targets if a in graph.get(b, ())})
    cycles = [f"{_shown(modules[a])} <-> {_shown(modules[b])}" for a, b in pairs]
    assert not cycles, f"{len(cycles)} pair(s) of modules import each other:\n" + "\n".join(cycles)


@pytest.mark.parametrize(("source", "name", "expected"), [
    ("import canary.storage.store\n", "canary.sweep.run", {"canary.storage.store"}),
    ("from canary.storage import store, Store\n", "canary.sweep.run", {"canary.storage.store", "canary.storage"}),
    ("from . import history\nfrom .decide import decide\n", "canary.sweep.run",
     {"canary.sweep.history", "canary.sweep.decide"}),
    ("def later():\n    from canary.sweep.run import run_sweep\n", "canary.sweep.report", {"canary.sweep.run"}),
    ("import json\nfrom confluent_kafka import Consumer\n", "canary.sweep.run", set()),
])
def test_the_import_graph_reads_every_form_of_import(tmp_path, source, name, expected):
    path = tmp_path / "module.py"
    path.write_text(source)
    assert _imported(name, path, _modules()) == expected
