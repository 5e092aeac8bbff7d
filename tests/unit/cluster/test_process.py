import socket
import subprocess
import sys
import time
from pathlib import Path

from canary import process


def _sleeper(tmp_path, mark):
    # A stand-in for a JVM: same marker convention, any long-lived command.
    cmd = [sys.executable, "-c", "import time; time.sleep(60)", mark]
    return process.start(cmd, tmp_path, tmp_path / "out.log")


def test_a_started_process_is_ours_until_stopped(tmp_path):
    mark = process.marker(tmp_path, 1)
    pid, started = _sleeper(tmp_path, mark)
    assert process.is_ours(pid, started, mark)
    assert not process.is_ours(pid, started, process.marker(tmp_path, 2))  # another node's marker
    assert not process.is_ours(pid, started + 1, mark)  # a reused pid has another start time
    process.stop(pid, started, mark)
    assert not process.is_ours(pid, started, mark)


def test_kill_marked_sweeps_every_process_under_a_directory(tmp_path):
    pids = [_sleeper(tmp_path, process.marker(tmp_path, i))[0] for i in (1, 2)]
    assert sorted(process.kill_marked(str(tmp_path.resolve()))) == sorted(pids)
    time.sleep(0.1)
    assert all(process.start_time(pid) is None for pid in pids)
    assert process.kill_marked(str(tmp_path.resolve())) == []


def test_require_free_names_the_port(tmp_path):
    import socket

    import pytest

    from canary.errors import PortInUseError

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        with pytest.raises(PortInUseError, match=f"port {port}"):
            process.require_free(port, "a node")


def test_a_started_process_is_ours_at_once(tmp_path):
    # Popen can return while the child is still in execve (empty /proc cmdline); start() waits that out.
    for i in range(20):
        mark = process.marker(tmp_path, i)
        pid, started = _sleeper(tmp_path, mark)
        try:
            assert process.is_ours(pid, started, mark)
        finally:
            process.stop(pid, started, mark, kill=True)


# A process whose main thread has exited is not gone while its other threads still run (process.start_time): a
# killed JVM's sockets stay open until its last thread is gone, and a restart that took it for gone found its
# metrics port taken and moved the agent to another one.
# The main thread exits (pthread_exit: the process stays) while another thread, holding a listening socket, runs on.
MAIN_EXITS_FIRST = """
import ctypes, socket, sys, threading, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen()
print(s.getsockname()[1], flush=True)
threading.Thread(target=lambda: (sys.stdin.readline(), s.close())).start()
ctypes.CDLL(None).pthread_exit(None)
"""


def _state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def _bindable(port: int) -> bool:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def test_a_process_whose_main_thread_exited_is_running_until_its_last_thread_is_gone():
    child = subprocess.Popen([sys.executable, "-c", MAIN_EXITS_FIRST], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             text=True)
    try:
        port = int(child.stdout.readline())
        deadline = time.monotonic() + 30
        while _state(child.pid) != "Z" and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _state(child.pid) == "Z"  # its main thread is a zombie ...
        assert process.start_time(child.pid) is not None  # ... yet the process is not gone:
        assert not _bindable(port)  # its socket is still open
        child.stdin.write("\n")
        child.stdin.flush()
        deadline = time.monotonic() + 30
        while process.start_time(child.pid) is not None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert process.start_time(child.pid) is None  # its last thread gone, it is
        assert _bindable(port)
    finally:
        child.kill()
        child.wait()
