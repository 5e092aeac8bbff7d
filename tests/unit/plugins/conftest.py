"""Airflow for the plugin and DAG unit tests: a private AIRFLOW_HOME (nothing is written to the user's), the
project's DAGs folder, no examples; the provider imported from this checkout's plugins/ (where the editable install
maps it too), never loaded as a plugins folder, which would import each of its files again as a top-level module."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
os.environ.setdefault("AIRFLOW_HOME", tempfile.mkdtemp(prefix="kafka-canary-airflow-unit-"))
os.environ["AIRFLOW__CORE__DAGS_FOLDER"] = str(REPO / "dags")
os.environ["AIRFLOW__CORE__PLUGINS_FOLDER"] = str(Path(os.environ["AIRFLOW_HOME"]) / "plugins")
os.environ["AIRFLOW__CORE__LOAD_EXAMPLES"] = "False"
if str(REPO / "plugins") not in sys.path:
    sys.path.insert(0, str(REPO / "plugins"))
