"""`kafka-canary ui` stopped the way services are stopped (SIGTERM, as systemd or `kill` do) stops everything it
started, as Ctrl-C does: `airflow standalone` with its API server, scheduler, DAG processor, triggerer and executor
workers, and the cluster's brokers."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from canary.airflow_stack import free_port

# make faults (a signal to the whole stack); make test keeps to its time budget.
pytestmark = [pytest.mark.integration, pytest.mark.e2e, pytest.mark.slow]
KAFKA_CANARY = str(Path(sys.executable).parent / "kafka-canary")


def _started_by(directory: Path) -> list[psutil.Process]:
    """Processes whose Airflow home or command line lies under `directory`: what the ui command started."""
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        try:
            home = proc.environ().get("AIRFLOW_HOME", "")
            if home.startswith(str(directory)) or str(directory) in " ".join(proc.info["cmdline"] or []):
                found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return [p for p in found if p.pid != os.getpid()]


def test_sigterm_stops_airflow_and_the_cluster(tmp_path):
    ui = subprocess.Popen([KAFKA_CANARY, "ui", "--dir", str(tmp_path), "--brokers", "1", "--port", str(free_port())],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    output: list[str] = []
    try:
        assert ui.stdout is not None
        for line in ui.stdout:
            output.append(line)
            if line.startswith("Airflow is up"):
                break
        else:
            pytest.fail("kafka-canary ui exited before Airflow was up:\n" + "".join(output[-40:]))
        running = _started_by(tmp_path)
        names = {" ".join(p.cmdline()[:3]) for p in running}
        assert any("standalone" in n for n in names) and any("kafka.Kafka" in " ".join(p.cmdline())
                                                              for p in running), names

        ui.send_signal(signal.SIGTERM)
        rest, _ = ui.communicate(timeout=120)
        assert ui.returncode == 0, "".join(output) + rest
        assert "stopping Airflow and the cluster" in rest
        deadline = time.monotonic() + 30  # the kernel reaps the last children a moment after their parent
        while (left := _started_by(tmp_path)) and time.monotonic() < deadline:
            time.sleep(1)
        assert not left, [" ".join(p.cmdline()) for p in left]
    finally:
        if ui.poll() is None:
            ui.kill()
        for proc in _started_by(tmp_path):
            proc.kill()
