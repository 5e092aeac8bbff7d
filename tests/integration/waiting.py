"""Polling helper shared by the integration tests (a condition, not a wall-clock assertion)."""

from __future__ import annotations

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
