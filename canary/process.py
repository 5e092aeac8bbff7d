"""Starting, checking and stopping the JVM of one node.

Every node's command line carries a marker (`-Dkafka.canary.node=<dir>#<id>`), so a process is
only ever signalled when it is provably ours: same pid, same start time, marker present. A command that takes no
extra argument (a service team's own) carries it in its environment instead (`KAFKA_CANARY_PROCESS`).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

from canary.errors import PortInUseError

MARKER = "-Dkafka.canary.node="
MARKER_ENV = "KAFKA_CANARY_PROCESS"  # not KAFKA_CANARY_MARKER: that one is the lane marker (canary.lanes)
_children: dict[int, subprocess.Popen] = {}  # JVMs this process started, so exits are reaped


def marker(directory: Path | str, node_id: int) -> str:
    return f"{MARKER}{Path(directory).resolve()}#{node_id}"


def proxy_marker(directory: Path | str, node_id: int) -> str:
    """The marker of the delay proxy in front of a node: another process, same directory sweep."""
    return f"{marker(directory, node_id)}:proxy"


def interrupt_on_sigterm() -> None:
    """SIGTERM (systemd, `kill`, a CI runner stopping a job) stops this process as Ctrl-C does: as a
    KeyboardInterrupt, so every `finally` stops what the command started (Airflow, clusters, probes) instead of the
    interpreter dying and leaving them running. Further SIGTERMs are ignored so that cleanup can finish."""

    def interrupt(signum, frame) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupt)


def _die_with_parent() -> None:
    # PR_SET_PDEATHSIG: the kernel kills the JVM if the process that started it dies (tests).
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(1, signal.SIGKILL)


def start(cmd: list[str], cwd: Path, log_file: Path, tie_to_parent: bool = False,
          env: dict[str, str] | None = None) -> tuple[int, int]:
    """Starts `cmd` detached in its own session; returns (pid, start time)."""
    log_file.parent.mkdir(parents=True, exist_ok=True)
    with open(log_file, "ab") as out:
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True, preexec_fn=_die_with_parent if tie_to_parent else None)
    _children[proc.pid] = proc
    # Popen may return while the child is still inside execve (vfork), when /proc/<pid>/cmdline reads
    # empty and the marker is not visible yet; wait for the new command line so `is_ours` holds at once.
    deadline = time.monotonic() + 5
    while args(proc.pid) in ([], [""]) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.002)
    started = start_time(proc.pid)
    if started is None:
        raise RuntimeError(f"process {cmd[0]} exited at once; see {log_file}")
    return proc.pid, started


def start_time(pid: int) -> int | None:
    """The process's start time in clock ticks since boot, or None when it is gone or a zombie."""
    child = _children.get(pid)
    if child is not None and child.poll() is not None:
        _children.pop(pid, None)
        return None
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    if fields[0] in ("Z", "X") and not _threads_left(pid):
        return None
    return int(fields[19])


def _threads_left(pid: int) -> bool:
    """Whether threads of a process whose main thread has exited still run: a killed JVM's main thread is a zombie
    at once, its other threads a moment later, and its sockets stay open until the last one is gone (a restart that
    binds the same port in between finds it taken)."""
    try:
        return len(os.listdir(f"/proc/{pid}/task")) > 1
    except OSError:
        return False


def args(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


def environment(pid: int) -> list[str]:
    """The process's environment as NAME=value strings (empty when it is gone or not ours to read)."""
    try:
        return Path(f"/proc/{pid}/environ").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


def is_ours(pid: int | None, started: int | None, mark: str) -> bool:
    """True when `pid` is still the process we started: same start time, marker on its command line, or in its
    environment as MARKER_ENV for a command that takes no extra argument (a service team's own)."""
    if not pid or started is None:
        return False
    return start_time(pid) == started and (mark in args(pid) or f"{MARKER_ENV}={mark}" in environment(pid))


def stop(pid: int | None, started: int | None, mark: str, kill: bool = False, timeout: float = 60.0,
         group: bool = False) -> None:
    """SIGTERM (Kafka's controlled shutdown) or SIGKILL; escalates to SIGKILL after `timeout`. Nothing to do
    unless `pid` is still the process we started. `group`: signal its whole process group (it leads one: `start`
    gives each its own session), so a wrapper script and the service it started stop together."""
    if pid is None or started is None or not is_ours(pid, started, mark):
        return
    send = os.killpg if group else os.kill
    with contextlib.suppress(ProcessLookupError):
        send(pid, signal.SIGKILL if kill else signal.SIGTERM)
    if wait_gone(pid, started, timeout):
        return
    with contextlib.suppress(ProcessLookupError):
        send(pid, signal.SIGKILL)
    wait_gone(pid, started, 10)


def wait_gone(pid: int, started: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if start_time(pid) != started:
            return True
        time.sleep(0.1)
    return start_time(pid) != started


def kill_marked(prefix: str) -> list[int]:
    """SIGKILLs every live process with a node marker that starts with `MARKER + prefix` (a sweep for
    JVMs whose pid never reached a state file); returns their pids once they are gone."""
    needle, in_env = MARKER + prefix, f"{MARKER_ENV}={MARKER}{prefix}"
    found = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (any(a.startswith(needle) for a in args(int(entry.name)))
                                     or any(v.startswith(in_env) for v in environment(int(entry.name)))):
            started = start_time(int(entry.name))
            if started is not None:
                found[int(entry.name)] = started
    for pid, started in found.items():
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        wait_gone(pid, started, 10)
    return sorted(found)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def require_free(port: int, what: str, host: str = "127.0.0.1", option: str = "--base-port") -> None:
    """Raises PortInUseError, naming `what` and the `option` that chooses another port, when `port` on `host` is
    taken: checked before anything is started, so a taken port changes nothing."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            raise PortInUseError(f"port {port} ({what}) is already in use; free it or choose another "
                                 f"{option}") from exc


def terminate(proc: subprocess.Popen, timeout: float = 10.0) -> None:
    """Stops a child process: SIGTERM, and SIGKILL when it is still there after `timeout` seconds."""
    proc.terminate()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout)


def accepts_connections(port: int, timeout: float = 1.0) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout):
            return True
    except OSError:
        return False


def wait_listening(port: int, timeout: float, alive=lambda: True) -> bool:
    """True once something accepts connections on loopback `port`; False after `timeout` or when
    `alive()` turns false (the process meant to listen has exited)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if accepts_connections(port, timeout=0.5):
            return True
        if not alive():
            return False
        time.sleep(0.05)
    return False
