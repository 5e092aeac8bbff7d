"""docs/design.md's module map is true to the tree: every file and folder it names exists, and every package of the
library, the provider and the Spark jobs is named in it."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DESIGN = ROOT / "docs" / "design.md"


def map_rows(text: str) -> list[str]:
    """The first cells of the module map's table."""
    section = text.split("## Module map and layers", 1)[1].split("\n## ", 1)[0]
    return [line.split("|")[1] for line in section.splitlines() if line.startswith("| `")]


def named_paths(cell: str) -> list[str]:
    """The paths a first cell names; a bare name (`demo.py`) is in the folder of the path before it."""
    paths: list[str] = []
    for name in re.findall(r"`([^`]+)`", cell):
        if "/" not in name.rstrip("/") and paths:
            name = str(Path(paths[-1]).parent / name) if not paths[-1].endswith("/") else paths[-1] + name
        paths.append(name)
    return paths


def packages() -> list[str]:
    found = [p.parent for top in ("canary", "plugins", "spark_jobs") for p in (ROOT / top).rglob("__init__.py")]
    return sorted(f"{p.relative_to(ROOT).as_posix()}/" for p in found if p != ROOT / "canary")


def test_every_path_the_map_names_exists():
    named = [p for cell in map_rows(DESIGN.read_text()) for p in named_paths(cell)]
    assert len(named) > 30
    missing = [p for p in named if not (ROOT / p).exists()]
    assert not missing, f"docs/design.md's module map names what the tree does not have: {missing}"


def test_every_package_is_in_the_map():
    named = {p for cell in map_rows(DESIGN.read_text()) for p in named_paths(cell)}
    absent = [p for p in packages() if p not in named]
    assert not absent, f"packages docs/design.md's module map does not name: {absent}"


def test_a_bare_name_is_read_in_the_folder_before_it():
    assert named_paths("`canary/cli.py`, `demo.py`") == ["canary/cli.py", "canary/demo.py"]
    assert named_paths("`canary/examples/`, `canary/examples/services/`") == ["canary/examples/",
                                                                              "canary/examples/services/"]
