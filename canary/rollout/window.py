"""The window of a rollout: traffic flows through both lanes for a while, with interim looks that may stop it early
(fail fast) and a tick about every second that watches what the kind watches (the cluster, its canary instances).
The broker and the client rollout both run their window through this loop."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from canary.judge import ROLLBACK, Brief
from canary.kafka.wait import POLL
from canary.rollout.core import Look, RolloutRun, Verdict
from canary.rollout.core.audit import AuditAction
from canary.rollout.core.verdict import record_verdict


def watch_window(run: RolloutRun, seconds: float, interval: float, look: Callable[[], Look],
                 tick: Callable[[float, bool], Brief | None]) -> tuple[list[Look], Look | None]:
    """Runs the window for `seconds`. `tick(at_s, look_due)` is called about every second; a brief it returns
    (ROLLBACK and why) stops the window. `look()` runs every `interval` seconds (not in the last second); a ROLLBACK
    look stops the window. Every look is audited. Returns (the interim looks, what stopped the window or None), each
    with its `at_s`."""
    started = time.monotonic()
    interim: list[Look] = []
    next_look = started + interval
    while (elapsed := time.monotonic() - started) < seconds:
        time.sleep(min(POLL, max(0.0, seconds - elapsed)))
        now = time.monotonic()
        due = now >= next_look and now - started < seconds - 1
        stop = tick(now - started, due)
        if stop:
            return interim, Look(**stop.model_dump(include={"verdict", "reason", "failed"}),
                                 at_s=round(now - started, 1))
        if due:
            next_look += interval
            result = look().model_copy(update={"at_s": round(time.monotonic() - started, 1)})
            interim.append(result)
            run.say("interim look at %.0fs: %s", result.at_s, result.line())
            run.audit.record(run.step, AuditAction.INTERIM_LOOK, **result.model_dump(mode="json"))
            if result.verdict == ROLLBACK:
                return interim, result
    return interim, None


def fail_fast_verdict(run: RolloutRun, stopped: Look, **details: Any) -> dict:
    """The ROLLBACK verdict of a window that stopped early (window already in run.json)."""
    return record_verdict(run, Verdict(verdict=ROLLBACK, engine="interim", failed=stopped.failed,
                                       reason=f"fail fast after {stopped.at_s}s: {stopped.reason}"), **details)
