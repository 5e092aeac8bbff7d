"""The audit log of one rollout: every action, when, and the state before and after, one JSON line each.
Kept in the run storage beside the report; secrets never reach it (client settings are redacted, and the known
secret values are cut out of any text, such as an error message that quoted one). Appends from tasks on several
machines at once never lose a line (canary.storage)."""

from __future__ import annotations

import json
import time
from pathlib import Path

from canary.kafka.secrets import scrub, scrub_text
from canary.storage import Store, open_store

AUDIT_KEY = "audit.jsonl"


class AuditLog:
    def __init__(self, store: Store | Path, run_id: str, secrets: list[str] | tuple[str, ...] = ()):
        """`store`: the run's storage (or a run directory on this disk)."""
        self.store = store if isinstance(store, Store) else open_store(store)
        self.run_id = run_id
        self.secrets = tuple(secrets)

    def record(self, step: str, action: str, **details) -> dict:
        """Appends one entry (durably: a crash right after an action still leaves its trace)."""
        entry = {"ts_ms": int(time.time() * 1000), "run_id": self.run_id, "step": step, "action": action,
                 **scrub(details)}
        self.store.append(AUDIT_KEY, scrub_text(json.dumps(entry, sort_keys=False, default=str), self.secrets).encode())
        return entry

    def entries(self) -> list[dict]:
        return [json.loads(line) for line in self.store.lines(AUDIT_KEY)]
