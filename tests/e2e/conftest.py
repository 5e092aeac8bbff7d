"""Airflow in this process (for the trigger test) gets a private AIRFLOW_HOME and the provider from this checkout's
plugins/; the `airflow` commands the tests start get theirs from canary.demo.airflow_env (the installed provider)."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
os.environ.setdefault("AIRFLOW_HOME", tempfile.mkdtemp(prefix="kafka-canary-airflow-e2e-"))
os.environ["AIRFLOW__CORE__LOAD_EXAMPLES"] = "False"
os.environ.setdefault("KAFKA_CANARY_PROJECT", str(REPO))  # the DAGs `airflow` commands run
if str(REPO / "plugins") not in sys.path:
    sys.path.insert(0, str(REPO / "plugins"))
