"""Airflow in this process (the trigger form, the hook, the preflight operator) gets a private AIRFLOW_HOME, the
project's DAGs, and the provider from this checkout's plugins/ (on the path, not as a plugins folder)."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
os.environ.setdefault("AIRFLOW_HOME", tempfile.mkdtemp(prefix="kafka-canary-airflow-reliability-"))
os.environ.setdefault("AIRFLOW__CORE__DAGS_FOLDER", str(REPO / "dags"))
os.environ.setdefault("AIRFLOW__CORE__PLUGINS_FOLDER", str(Path(os.environ["AIRFLOW_HOME"]) / "plugins"))
os.environ["AIRFLOW__CORE__LOAD_EXAMPLES"] = "False"
os.environ.setdefault("KAFKA_CANARY_PROJECT", str(REPO))  # the DAGs `airflow` commands run
for path in (REPO / "plugins", REPO):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))
