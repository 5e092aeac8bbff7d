import sys
import time

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
