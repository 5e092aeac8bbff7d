"""The health sweep DAG end to end: `airflow dags test kafka_health_sweep` on a real local cluster, every task executed
by Airflow (SQLite metadata database, the installed provider). The registered clusters come from the Airflow
Variable, the sweep is mapped over them, its verdict is published as the cluster's asset event, and a DEGRADED
cluster (here: an SLO no cluster meets) is alerted through the callback: alert line, alerts.jsonl, webhook."""

from __future__ import annotations

import contextlib
import json
import sqlite3
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from canary.demo import airflow_command, airflow_env, run_dag_test, task_states

pytestmark = [pytest.mark.integration, pytest.mark.e2e]

DAG_ID = "kafka_health_sweep"
TOKEN = "SECRET-TOKEN-e2e"
# p99 end-to-end latency at most 0.05 ms: no real cluster meets it, so the sweep is DEGRADED by its SLO guard.
UNMEETABLE_SLO = {"metrics": {"e2e_latency_p99": {"slo": 0.05}}}


@contextlib.contextmanager
def webhook():
    received: list[tuple[str, dict]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            received.append((self.path, json.loads(self.rfile.read(int(self.headers["Content-Length"])))))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/alerts/{TOKEN}", received
    finally:
        server.shutdown()
        server.server_close()


def test_health_sweep_dag_sweeps_registered_clusters_publishes_assets_and_alerts(cluster_factory, tmp_path):
    cluster = cluster_factory(brokers=3)
    home, history = tmp_path / "airflow", tmp_path / "history"
    home.mkdir()
    env = airflow_env(home, tmp_path / "rollouts", cluster.directory)
    env["KAFKA_CANARY_HISTORY"] = str(history)
    env["AIRFLOW_VAR_KAFKA_CANARY_SWEEP_CLUSTERS"] = json.dumps(["kafka_canary_default"])
    migrate = subprocess.run([airflow_command(), "db", "migrate"], env=env, capture_output=True, text=True,
                             timeout=600)
    assert migrate.returncode == 0, migrate.stdout[-3000:] + migrate.stderr[-3000:]

    with webhook() as (url, received):
        env["AIRFLOW_VAR_KAFKA_CANARY_ALERT_WEBHOOK"] = url
        params = {"duration": "15s", "probe_rate": 50, "judge_config": UNMEETABLE_SLO}
        code = run_dag_test(env, params, tmp_path / "dags-test.log", echo=False, timeout=600, dag_id=DAG_ID)
    log = (tmp_path / "dags-test.log").read_text()

    assert code == 0, log[-5000:]
    assert task_states(home, DAG_ID) == [("registered_clusters", "success", 1), ("sweep", "success", 1),
                                         ("summary", "success", 1)], log[-5000:]
    # The sweep: kept in the cluster's history, with its result and report.
    (parquet,) = (history / "kafka_canary_default").glob("*.parquet")
    (out,) = (history / "kafka_canary_default" / "reports").iterdir()
    result = json.loads((out / "result.json").read_text())
    assert parquet.stem == result["sweep_id"] == out.name
    assert result["verdict"] == "DEGRADED" and result["first_sweep"]
    assert result["reason"].startswith("SLO breached: e2e_latency_p99:"), result["reason"]
    assert result["summary"]["observations"] > 0 and result["summary"]["availability"] is not None
    assert (out / "report.html").exists() and (out / "trend.png").exists()
    # The cluster's health as an asset event, through the alias, with the verdict.
    with contextlib.closing(sqlite3.connect(home / "airflow.db")) as db:
        events = db.execute("SELECT a.uri, e.extra, e.source_task_id, e.source_map_index FROM asset_event e "
                            "JOIN asset a ON a.id = e.asset_id").fetchall()
        aliases = db.execute("SELECT al.name FROM asset_alias al JOIN asset_alias_asset_event x "
                             "ON x.alias_id = al.id").fetchall()
    ((uri, extra, source_task, map_index),) = events
    assert (uri, source_task, map_index) == ("kafka-canary://kafka_canary_default/health", "sweep", 0)
    assert json.loads(extra)["verdict"] == "DEGRADED" and json.loads(extra)["sweep_id"] == result["sweep_id"]
    assert aliases == [("kafka-canary-health",)]
    # The alert: a log line, alerts.jsonl, the webhook (its URL, a secret, never in the log).
    assert "ALERT kafka-canary DEGRADED: cluster kafka_canary_default: SLO breached" in log
    (line,) = (history / "alerts.jsonl").read_text().splitlines()
    alert = json.loads(line)
    assert (alert["cluster"], alert["status"], alert["sweep_id"]) == ("kafka_canary_default", "DEGRADED",
                                                                      result["sweep_id"])
    assert alert["details"]["dag_id"] == DAG_ID and alert["details"]["map_index"] == 0
    assert received == [(f"/alerts/{TOKEN}", alert)]
    assert TOKEN not in log
