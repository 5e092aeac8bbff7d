"""A person's pause of a run between two waves of its promotion: a key of its own in the run's storage (not run.json,
which the running step rewrites), set and cleared from the command line or the Airflow UI while the step runs; the
promotion reads it before each wave and waits, with progress, until it is cleared."""

from __future__ import annotations

import json
import time
from collections.abc import Callable

from canary.fields import format_utc
from canary.kafka.wait import WaitTimeout, wait_until
from canary.rollout.core.audit import AuditAction, AuditLog
from canary.storage import Store

PAUSE_KEY = "pause.json"


def pause(store: Store, audit: AuditLog, by: str, reason: str = "") -> dict:
    """Asks the run's promotion to stop before its next wave, in the run's audit log too (the report shows it);
    idempotent (a second pause keeps the first's)."""
    held = paused(store)
    if held is not None:
        return held
    entry = {"by": by, "at_ms": int(time.time() * 1000), "reason": reason[:500]}
    store.write(PAUSE_KEY, json.dumps(entry).encode())
    audit.record("pause", AuditAction.PAUSED, **entry)
    return entry


def resume(store: Store, audit: AuditLog, by: str) -> dict | None:
    """Lets a paused promotion go on; returns the pause it ended (None: it was not paused)."""
    held = paused(store)
    if held is not None:
        store.delete(PAUSE_KEY)
        audit.record("pause", AuditAction.RESUMED, by=by)
    return held


def paused(store: Store) -> dict | None:
    """The run's pause ({by, at_ms, reason}), or None."""
    raw = store.read(PAUSE_KEY)
    if raw is None:
        return None
    try:
        entry = json.loads(raw)
    except ValueError:
        entry = {}
    return entry if isinstance(entry, dict) else {}


def describe(entry: dict) -> str:
    when = format_utc(entry["at_ms"]) if isinstance(entry.get("at_ms"), int) else "an unknown time"
    why = f" ({entry['reason']})" if entry.get("reason") else ""
    return f"paused by {entry.get('by') or 'someone'} at {when}{why}"


def wait_while_paused(store: Store, where: str, timeout: float, resume_hint: str,
                      progress: Callable[[str], None] | None) -> float:
    """Blocks while the run is paused, saying so (`where`: before which wave); returns the seconds waited. Raises
    WaitTimeout, naming how to resume, when it stays paused past `timeout`."""
    def check() -> str | None:
        held = paused(store)
        return None if held is None else f"{describe(held)}, before {where}; {resume_hint}"
    try:
        return wait_until(f"the pause before {where}", timeout, check, progress, progress_every=60.0, poll=5.0)
    except WaitTimeout as exc:
        raise WaitTimeout(f"{exc}; the promotion stopped there and goes on where it stopped when run again after "
                          f"`resume`") from None
