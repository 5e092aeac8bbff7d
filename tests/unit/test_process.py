"""A process whose main thread has exited is not gone while its other threads still run (canary.process.start_time):
a killed JVM's sockets stay open until its last thread is gone, and a restart that took it for gone found its
metrics port taken and moved the agent to another one (docs/bench.md, fault suite)."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

from canary import process

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
