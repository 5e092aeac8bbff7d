"""Building the wheel and running what a fresh venv installed from it, shared by the install tests.

The wheel is built from a copy of what pyproject.toml packages (so the checkout gets no build/ or egg-info) with pip's
build isolation (setuptools from PyPI, as `pip install .` does). Commands run outside the repository, in an
environment that pins them to the venv's own packages: no source tree on the path, no other interpreter for Spark."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGED = ("pyproject.toml", "README.md", "canary", "plugins")
NOT_INHERITED = ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")


def run(cmd: list, **kwargs) -> subprocess.CompletedProcess:
    """Runs `cmd` (text output captured); fails the test, showing the output's tail, unless it exits 0."""
    done = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kwargs)
    assert done.returncode == 0, f"{cmd}: exit {done.returncode}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    return done


def build_wheel(work: Path) -> Path:
    """The project's wheel, built under `work` from a copy of the packaged files."""
    for name in PACKAGED:
        source, copy = REPO / name, work / "src" / name
        if source.is_dir():
            shutil.copytree(source, copy, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            copy.parent.mkdir(exist_ok=True)
            shutil.copy(source, copy)
    run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", work / "dist", work / "src"], timeout=300)
    (wheel,) = (work / "dist").glob("kafka_canary-*.whl")
    return wheel


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without what would let a command import anything but the venv's packages; pip
    run with a checkout on PYTHONPATH would also take its egg-info for kafka-canary installed already."""
    return {k: v for k, v in os.environ.items() if k not in NOT_INHERITED} | extra


def wheel_venv(work: Path, *pip_args: object, extra: str = "", timeout: float = 300) -> Path:
    """A fresh venv under `work` with the project's wheel (and `extra`, e.g. "[airflow]") installed by pip with
    `pip_args` (index and constraint options)."""
    wheel = build_wheel(work)
    venv = work / "venv"
    run([sys.executable, "-m", "venv", "--without-pip", venv])
    # --no-compile: pip byte-compiles every module it installs, most of which no test imports; what is imported is
    # compiled then. Airflow's install took 109-114 s with it and 68-74 s without (alone on the machine).
    run([sys.executable, "-m", "pip", "--python", venv / "bin" / "python", "install", "-q", "--no-compile",
         *pip_args, f"{wheel}{extra}"], timeout=timeout, env=clean_env())
    return venv
