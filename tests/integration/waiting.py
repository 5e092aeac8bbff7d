"""Polling helper shared by the integration tests (a condition, not a wall-clock assertion)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time


def wait_until(condition, timeout: float = 90.0, what: str = "condition"):
    """Returns the first truthy value of `condition()`; fails the test after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


def killed_when(args: list[str], condition, timeout: float, what: str) -> None:
    """Runs `kafka-canary <args>` in a process group of its own and SIGKILLs the group once `condition()` holds (or
    when waiting for it fails): a rollout process killed mid-step."""
    worker = subprocess.Popen([sys.executable, "-m", "canary.cli", *args], env={**os.environ, "PYTHONUNBUFFERED": "1"},
                              start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until(condition, timeout, what)
    finally:
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait()
