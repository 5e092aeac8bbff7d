"""The audit log of one rollout: every action, when, and the state before and after, one JSON line each.
Kept in the run directory beside the report; secrets never reach it (client settings are redacted, and the known
secret values are cut out of any text, such as an error message that quoted one)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from canary.kafka.secrets import scrub, scrub_text


class AuditLog:
    def __init__(self, path: Path, run_id: str, secrets: list[str] | tuple[str, ...] = ()):
        self.path = Path(path)
        self.run_id = run_id
        self.secrets = tuple(secrets)

    def record(self, step: str, action: str, **details) -> dict:
        """Appends one entry (flushed and fsynced: a crash right after an action still leaves its trace)."""
        entry = {"ts_ms": int(time.time() * 1000), "run_id": self.run_id, "step": step, "action": action,
                 **scrub(details)}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a") as f:
            f.write(scrub_text(json.dumps(entry, sort_keys=False, default=str), self.secrets) + "\n")
            f.flush()
            os.fsync(f.fileno())
        return entry

    def entries(self) -> list[dict]:
        if not self.path.exists():
            return []
        return [json.loads(line) for line in self.path.read_text().splitlines() if line.strip()]
