"""Waiting for the cluster to reach a state, saying what is still missing: every wait in a rollout polls a check
that answers None (done) or what is still missing, reports progress now and then, and names the missing part when
it gives up. A cluster that does not answer for a moment (a broker just restarted) is something missing, not an
error."""

from __future__ import annotations

import time
from collections.abc import Callable

from confluent_kafka import KafkaException
from kafka.errors import KafkaError

from canary.errors import CanaryError, ClusterError

POLL = 1.0  # seconds between two looks


class WaitTimeout(CanaryError):
    """The awaited state was not reached in time; the message names what was still missing."""


def describe(exc: BaseException) -> str:
    """An exception as a log line or a verdict's reason shows it: its message, or its type when it has none
    (a TimeoutError from an admin future says nothing)."""
    return str(exc) or type(exc).__name__


def wait_until(what: str, timeout: float, check: Callable[[], str | None],
               progress: Callable[[str], None] | None = None, progress_every: float = 10.0,
               poll: float = POLL, moving: Callable[[str], bool] | None = None) -> float:
    """Polls `check` (None = done, else what is still missing) until done. `progress` gets a line every
    `progress_every` seconds. Returns the seconds waited; raises WaitTimeout after `timeout`, or with `moving` (told
    what is missing at each look, true when that is progress) after `timeout` without progress: a slow change is
    waited for while it advances, a stuck one is not."""
    start = time.monotonic()
    last_report = last_move = start
    while True:
        try:
            missing = check()
        except (KafkaException, KafkaError, ClusterError, TimeoutError) as exc:
            missing = f"cluster not answering: {describe(exc)}"
        if missing is None:
            return time.monotonic() - start
        now = time.monotonic()
        if moving is not None and moving(missing):
            last_move = now
        if now - last_move > timeout:
            raise WaitTimeout(f"{what}: not done after {timeout:.0f}s: {missing}" if last_move == start else
                              f"{what}: no progress for {timeout:.0f}s ({now - start:.0f}s in all): {missing}")
        if progress is not None and now - last_report >= progress_every:
            progress(f"{what}: waiting {now - start:.0f}s, {missing}")
            last_report = now
        time.sleep(poll)
