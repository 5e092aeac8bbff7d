"""The Docker engine the container tests run on: the one DOCKER_HOST or the local socket names, else a dockerd this
session starts (Debian's docker.io, which `make test` installs) and stops at the end. KAFKA_CANARY_SKIP_DOCKER=1 is
the only way to skip those tests; without an engine they fail, saying what is missing."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from canary.containers import engine
from canary.process import terminate

SKIP = "KAFKA_CANARY_SKIP_DOCKER"


@contextmanager
def docker_engine() -> Iterator:
    """A client of a running engine (started here when none answers and this user can)."""
    if os.environ.get(SKIP) == "1":
        pytest.skip(f"{SKIP}=1: the Docker tests were skipped on purpose")
    try:
        yield engine.connect()
        return
    except engine.DockerUnavailable as exc:
        missing = str(exc)
    dockerd = shutil.which("dockerd") or "/usr/sbin/dockerd"
    if os.environ.get("DOCKER_HOST") or not Path(dockerd).exists() or os.geteuid() != 0:
        pytest.fail(f"no Docker engine: {missing} (install Debian's docker.io as root, or set {SKIP}=1 to skip)",
                    pytrace=False)
    state = Path(tempfile.mkdtemp(prefix="dockerd-"))
    with open(state / "dockerd.log", "w") as log:
        daemon = subprocess.Popen([dockerd, "--pidfile", str(state / "dockerd.pid")], stdout=log, stderr=log)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                client = engine.connect()
                break
            except engine.DockerUnavailable:
                if daemon.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"dockerd did not start: {(state / 'dockerd.log').read_text()[-600:]}", pytrace=False)
                time.sleep(0.5)
        yield client
    finally:
        terminate(daemon, 60)
