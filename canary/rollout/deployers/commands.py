"""Running one templated deployer command: the template's `{placeholders}` filled with shell-quoted values, run by
`/bin/sh -c` in its own process group, killed with its children when it outlives its timeout, its exit status
checked. What it printed is kept (the tail) with every secret value cut, for the audit log and the error message."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import signal
import string
import subprocess
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from canary.errors import ClusterError, InfrastructureError
from canary.kafka.secrets import scrub_text

OUTPUT_TAIL = 4000  # characters of a command's output kept for the audit log


class CommandFailed(ClusterError):
    """A deployer command exited non-zero, hung past its timeout, or could not be started; `output` is the tail of
    what it printed (secrets cut)."""

    def __init__(self, message: str, output: str = ""):
        super().__init__(message)
        self.output = output


class CommandUnavailable(CommandFailed, InfrastructureError):
    """The command could not be run where it should: not started at all, not found or not executable (exit 127,
    126), or ssh could not reach the host (its exit status 255). No answer about the broker."""


# Exit statuses that say the road to the node is broken rather than the node: the shell's "not found" and "not
# executable", and ssh's own failure (it exits 255 when it cannot connect or authenticate).
UNAVAILABLE = {126: "the command is not executable", 127: "the command was not found",
               255: "ssh could not reach or log in to the host, or the command itself exited 255"}


@dataclass(frozen=True)
class CommandResult:
    action: str          # roll, stop, start, describe, prepare, roll_controller
    command: str         # as run (values filled in), secrets cut
    exit_code: int
    seconds: float
    output: str          # stdout and stderr interleaved, the tail, secrets cut

    def to_dict(self) -> dict:
        return {"name": self.action, "command": self.command, "exit_code": self.exit_code,
                "seconds": round(self.seconds, 2), "output": self.output}


def placeholders(template: str) -> set[str]:
    """The `{names}` a template uses; raises ValueError for a malformed template (an unclosed brace, `{0}`, `{a.b}`)."""
    names = set()
    for _, name, spec, conversion in string.Formatter().parse(template):
        if name is None:
            continue
        if not name.isidentifier() or spec or conversion:
            raise ValueError(f"{{{name}}} is not a placeholder: write {{name}} with a plain name (use {{{{ and }}}} "
                             f"for literal braces)")
        names.add(name)
    return names


# Characters a JSON string may carry as they are: none of them means anything to a shell, quoted or not.
_INERT = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-/+=@%^,:")


def inert_json(value: object) -> str:
    """`value` as compact JSON in which every string character a shell could act on (`$`, backquotes, quotes,
    backslashes, spaces, `;`, `|`, ...) is written as a \\uXXXX escape. The same JSON to any parser, and no shell
    can run anything in it however a template quotes it and however many shells parse it again (`ssh host cmd
    {config_json}` hands it to a second shell on the host)."""
    def escape(text: str) -> str:
        return '"' + "".join(c if c in _INERT else f"\\u{ord(c):04x}" if ord(c) < 0x10000 else
                             "".join(f"\\u{u:04x}" for u in _utf16(c)) for c in text) + '"'

    def dump(item: object) -> str:
        if isinstance(item, dict):
            return "{" + ",".join(f"{escape(str(k))}:{dump(v)}" for k, v in item.items()) + "}"
        if isinstance(item, list | tuple):
            return "[" + ",".join(dump(v) for v in item) + "]"
        if isinstance(item, str):
            return escape(item)
        return json.dumps(item)   # numbers, booleans, null: digits and letters only
    return dump(value)


def _utf16(c: str) -> tuple[int, int]:
    """A character beyond the basic plane as JSON writes it: its UTF-16 surrogate pair."""
    code = ord(c) - 0x10000
    return 0xD800 + (code >> 10), 0xDC00 + (code & 0x3FF)


def quoted_placeholders(template: str) -> list[str]:
    """The placeholders a template writes inside quotes ('{x}', "{x}"): each value is quoted for the shell already,
    and a second pair of quotes around it breaks that quoting (the value's own characters then stand unquoted)."""
    inside: list[str] = []
    quote = ""
    for literal, name, _, _ in string.Formatter().parse(template):
        escaped = False
        for c in literal:
            if escaped:
                escaped = False
            elif c == "\\" and quote != "'":
                escaped = True
            elif quote and c == quote:
                quote = ""
            elif not quote and c in "'\"":
                quote = c
        if name is not None and quote:
            inside.append(name)
    return inside


def render(template: str, values: Mapping[str, object]) -> str:
    """The template with each placeholder replaced by its value, quoted for the shell (a value is one argument
    whatever it holds: a config value cannot add a command)."""
    return template.format_map({k: shlex.quote(str(v)) for k, v in values.items()})


def run(action: str, template: str, values: Mapping[str, object], timeout: float,
        secrets: tuple[str, ...] = ()) -> CommandResult:
    """Runs the command; returns its result when it exits 0, else raises CommandFailed naming the command, the exit
    status (or the timeout) and the end of its output."""
    command = render(template, values)
    shown = scrub_text(command, secrets)
    started = time.monotonic()
    # Output goes to a file, not a pipe: the command is done when its shell exits, even if a child it started in the
    # background (a daemon, `cmd &`) still holds its output open.
    with tempfile.TemporaryFile() as sink:
        try:
            proc = subprocess.Popen(["/bin/sh", "-c", command], stdout=sink, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True)
        except OSError as exc:
            raise CommandUnavailable(f"the {action} command could not be started ({exc}): {shown}") from None
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_tree(proc)
            tail = _tail(_read(sink), secrets)
            raise CommandFailed(f"the {action} command did not finish within {timeout:g}s and was killed with its "
                                f"children: {shown}" + (f"; its output: {_telling_lines(tail)}" if tail else ""),
                                tail) from None
        out = _read(sink)
    result = CommandResult(action, shown, proc.returncode, time.monotonic() - started, _tail(out, secrets))
    if proc.returncode != 0:
        why = UNAVAILABLE.get(proc.returncode)
        error = CommandUnavailable if why else CommandFailed
        raise error(f"the {action} command exited with status {proc.returncode}" + (f" ({why})" if why else "")
                    + f": {shown}" + (f"; its output: {_telling_lines(result.output)}" if result.output else ""),
                    result.output) from None
    return result


def _read(sink) -> str:
    sink.seek(0)
    return sink.read().decode(errors="replace")


def _kill_tree(proc: subprocess.Popen) -> None:
    """SIGTERM to the command's process group (ssh, ansible and their children) and to every process descended from
    it (a child that left the group with setsid is still its descendant), SIGKILL after 5 s. A daemon that forked
    twice belongs to init and is out of reach."""
    for sig, wait in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
        for pid in _descendants(proc.pid):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(wait)
            return
        except subprocess.TimeoutExpired:
            continue


def _descendants(root: int) -> list[int]:
    """Every running process below `root` (from /proc; none where there is no /proc)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _tail(output: str | None, secrets: tuple[str, ...]) -> str:
    text = scrub_text(output or "", secrets).strip()
    return text[-OUTPUT_TAIL:]


_TELLING = re.compile(r"error|exception|exited|failed|refused|denied|not found|no such|timed out", re.IGNORECASE)


def _telling_lines(output: str, count: int = 3) -> str:
    """The lines of `output` that say what went wrong (a stack trace's frames left out), else its last lines."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    telling = [line for line in lines if _TELLING.search(line) and not line.startswith("at ")]
    return " | ".join(telling[:count] or lines[-count:])[:600]
