"""Running one templated deployer command: the template's `{placeholders}` filled with shell-quoted values, run by
`/bin/sh -c` in its own process group, killed with its children when it outlives its timeout, its exit status
checked. What it printed is kept (the tail) with every secret value cut, for the audit log and the error message."""

from __future__ import annotations

import os
import re
import shlex
import signal
import string
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass

from canary.errors import ClusterError
from canary.kafka.secrets import scrub_text

OUTPUT_TAIL = 4000  # characters of a command's output kept for the audit log


class CommandFailed(ClusterError):
    """A deployer command exited non-zero, hung past its timeout, or could not be started; `output` is the tail of
    what it printed (secrets cut)."""

    def __init__(self, message: str, output: str = ""):
        super().__init__(message)
        self.output = output


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
    try:
        proc = subprocess.Popen(["/bin/sh", "-c", command], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True, text=True, errors="replace")
    except OSError as exc:
        raise CommandFailed(f"the {action} command could not be started ({exc}): {shown}") from None
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        out, _ = proc.communicate()
        tail = _tail(out, secrets)
        raise CommandFailed(f"the {action} command did not finish within {timeout:g}s and was killed with its "
                            f"children: {shown}" + (f"; its output: {_telling_lines(tail)}" if tail else ""),
                            tail) from None
    result = CommandResult(action, shown, proc.returncode, time.monotonic() - started, _tail(out, secrets))
    if proc.returncode != 0:
        raise CommandFailed(f"the {action} command exited with status {proc.returncode}: {shown}"
                            + (f"; its output: {_telling_lines(result.output)}" if result.output else ""),
                            result.output) from None
    return result


def _kill_group(proc: subprocess.Popen) -> None:
    """SIGTERM to the command's whole process group (ssh, ansible and their children), SIGKILL after 5 s."""
    for sig, wait in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(wait)
            return
        except subprocess.TimeoutExpired:
            continue


def _tail(output: str | None, secrets: tuple[str, ...]) -> str:
    text = scrub_text(output or "", secrets).strip()
    return text[-OUTPUT_TAIL:]


_TELLING = re.compile(r"error|exception|exited|failed|refused|denied|not found|no such|timed out", re.IGNORECASE)


def _telling_lines(output: str, count: int = 3) -> str:
    """The lines of `output` that say what went wrong (a stack trace's frames left out), else its last lines."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    telling = [line for line in lines if _TELLING.search(line) and not line.startswith("at ")]
    return " | ".join(telling[:count] or lines[-count:])[:600]
