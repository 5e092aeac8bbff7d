"""Both application files of the analysis job (spark_jobs/ for the Airflow DAG, the package's for `kafka-canary
analyze`) run canary.analysis.job.main: a bad request is refused in one line, exit 2, before Spark starts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from canary.analysis import submit

REPO = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("launcher", [REPO / "spark_jobs" / "canary_analysis.py", Path(str(submit.JOB))],
                         ids=["spark_jobs", "package"])
def test_the_launcher_runs_the_job(tmp_path, launcher):
    done = subprocess.run([sys.executable, str(launcher), "--observations", "x.jsonl", "--out", str(tmp_path),
                           "--from", "yesterday"], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stderr == "error: --from 'yesterday' is neither epoch milliseconds nor an ISO-8601 time such as " \
                          "2026-01-31T12:00:00Z\n"
