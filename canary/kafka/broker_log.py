"""Why a Kafka process stopped, in its own words: the cause line of its log's last fatal exception ("requirement
failed: replica.socket.timeout.ms should always be at least replica.fetch.wait.max.ms …"), so an error names it
instead of "not registered yet"."""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

_FATAL = "Exiting Kafka due to fatal exception"
_CAUSE = re.compile(r"(Exception|Error)\b")
TAIL_LINES = 400
MAX_CHARS = 400


def fatal_cause(lines: Iterable[str]) -> str | None:
    """The cause of the last fatal exit among `lines` (the line after Kafka's "Exiting Kafka due to fatal
    exception"), else the last exception or error line that is not a stack frame; None when there is none."""
    lines = [line.rstrip() for line in lines]
    for i in range(len(lines) - 1, -1, -1):
        if _FATAL in lines[i] and i + 1 < len(lines) and lines[i + 1].strip():
            return lines[i + 1].strip()[:MAX_CHARS]
    causes = [line.strip() for line in lines if _CAUSE.search(line) and not line.startswith(("\t", " "))]
    return causes[-1][:MAX_CHARS] if causes else None


def fatal_cause_in(log_dir: Path) -> str | None:
    """fatal_cause of the end of a node's server.log, else of its stdout.log (where a JVM that never got to its
    logger writes)."""
    for name in ("server.log", "stdout.log"):
        try:
            with open(log_dir / name, errors="replace") as file:
                tail = file.readlines()[-TAIL_LINES:]
        except OSError:
            continue
        if (cause := fatal_cause(tail)) is not None:
            return cause
    return None
