"""The Spark engine: the analysis job (canary.analysis.job, started through the launcher shipped in this package,
resources/canary_analysis.py) run with spark-submit. The job's exit code is its verdict; for a kafka:// source
Spark's Kafka source jars are passed with --jars (canary.analysis.connector)."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from importlib.resources import as_file, files
from pathlib import Path
from typing import IO

from canary.analysis.connector import kafka_connector_jars, pyspark_home
from canary.analysis.errors import AnalysisTimeout, RequestError, SparkSubmitError
from canary.analysis.request import AnalysisRequest
from canary.analysis.result import AnalysisResult

# The launcher, not the job module itself: spark-submit puts the application's folder first on the driver's
# sys.path, and this package's folder there would shadow top-level modules by its module names.
JOB = files("canary.analysis") / "resources" / "canary_analysis.py"
DEFAULT_MASTER = "local[2]"
# The masters spark-submit takes; anything else fails in the JVM with a stack trace, after Spark started.
MASTER = re.compile(r"^(local(\[(\*|\d+)(,\d+)?\])?|yarn|spark://[^\s/]+(:\d+)?(,[^\s/]+(:\d+)?)*|k8s://\S+)$")


def check_master(master: str) -> None:
    """Refuses a Spark master spark-submit would refuse, naming the forms it takes."""
    if not MASTER.match(master):
        raise RequestError(f"--master {master!r} is not a Spark master: use local, local[N], local[*], "
                           f"spark://HOST:PORT, yarn or k8s://URL")


def spark_submit() -> str:
    """The spark-submit beside this interpreter (a venv's bin/), else the installed pyspark's."""
    home, _ = pyspark_home()
    return shutil.which("spark-submit", path=str(Path(sys.executable).parent)) or str(home / "bin" / "spark-submit")


def spark_submit_command(request: AnalysisRequest, job: Path, master: str = DEFAULT_MASTER) -> list[str]:
    # The driver and the workers run this interpreter, which imports this canary.
    cmd = [spark_submit(), "--master", master, "--conf", "spark.ui.enabled=false",
           "--conf", f"spark.pyspark.python={sys.executable}"]
    if request.from_kafka:
        cmd += ["--jars", ",".join(str(j) for j in kafka_connector_jars())]
    return [*cmd, str(job), *request.job_args()]


@contextlib.contextmanager
def _output(log: Path | None) -> Iterator[IO | None]:
    if log is None:
        yield None
        return
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "w") as out:
        yield out


def run_spark(request: AnalysisRequest, *, master: str = DEFAULT_MASTER, timeout: float | None = None,
              log: Path | None = None) -> AnalysisResult:
    """Runs the job for `request` (checked by the caller) and returns its result; spark-submit's output goes to
    `log` (None: this process's stdout and stderr). Raises SparkSubmitError when spark-submit cannot start,
    ConnectorError when the Kafka source jars cannot be resolved, AnalysisTimeout after `timeout` seconds."""
    check_master(master)
    env = dict(os.environ)
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    if master.startswith("local"):  # a local driver binds loopback, not the machine's interface address
        env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    request.verdict_file.unlink(missing_ok=True)  # a failed run must not leave an earlier run's verdict readable
    with as_file(JOB) as job, _output(log) as out:
        cmd = spark_submit_command(request, job, master)
        try:
            proc = subprocess.run(cmd, env=env, timeout=timeout, stdout=out,
                                  stderr=subprocess.STDOUT if out else None)
        except subprocess.TimeoutExpired:
            raise AnalysisTimeout(f"the Spark analysis did not finish within {timeout:.0f}s"
                                  + (f"; see {log}" if log else "")) from None
        except OSError as exc:
            raise SparkSubmitError(f"cannot run {cmd[0]}: {exc.strerror or exc}") from None
    return AnalysisResult.from_job("spark", proc.returncode, request.out, log)
