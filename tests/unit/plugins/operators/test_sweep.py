"""HealthSweepOperator: connection → SweepConfig, the sweep's small result, the cluster's asset event through the
alias; the alert callbacks (a DEGRADED result alerts, a HEALTHY one does not, a failed task alerts)."""

from __future__ import annotations

import json

import pytest
from airflow.sdk import Asset, AssetAlias
from airflow.sdk.execution_time.context import OutletEventAccessors
from kafka_canary_provider.hooks.kafka_canary import KafkaCanaryHook
from kafka_canary_provider.operators import sweep as op_module
from kafka_canary_provider.operators.sweep import (
    HEALTH_ALIAS,
    HealthSweepOperator,
    alert_if_degraded,
    alert_on_failure,
    health_asset,
)

from canary import sweep

SECRET = "s3cr3t-sasl"


@pytest.fixture
def connection(monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_PROD_EU", json.dumps({"conn_type": "kafka_canary", "password": SECRET, "extra": {
        "dir": "/srv/cluster", "client": {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "PLAIN"}}}))
    monkeypatch.setattr(KafkaCanaryHook, "bootstrap_servers", lambda self, section=None: "k1:9092,k2:9092")


def _result(verdict: str, **extra) -> dict:
    return {"cluster": "prod_eu", "sweep_id": "20270101T000000Z-abcdef", "verdict": verdict, "reason": "because",
            "first_sweep": False, "during_rollout": False, "seconds": 31.2, "report": "/h/report.html",
            "result_file": "/h/result.json", "history": "/h", "history_file": "/h/x.parquet",
            "trend_file": "/h/trend.json", "reference_sweeps": 2, "summary": {}} | extra


def test_execute_sweeps_the_connections_cluster_and_publishes_its_health(connection, monkeypatch, tmp_path):
    seen = []

    def fake_run_sweep(config, history, index, origin):
        seen.append(config)
        assert index is None and origin is None  # a history of its own: its pages are not the index's; no DAG run
        assert history.where("x") == str(tmp_path / "prod_eu" / "x")  # the cluster's history under the root given
        return sweep.SweepBrief.model_validate(_result(sweep.HEALTHY))

    monkeypatch.setattr(sweep, "run_sweep", fake_run_sweep)
    operator = HealthSweepOperator(task_id="sweep", kafka_canary_conn_id="prod_eu", duration="45s", probe_rate=7,
                                   reference_sweeps=3, judge_config={"alpha": 0.02}, history=str(tmp_path),
                                   outlets=[AssetAlias(HEALTH_ALIAS)])
    events = OutletEventAccessors()
    result = operator.execute({"outlet_events": events})

    (config,) = seen
    assert (config.bootstrap_servers, config.cluster, config.duration, config.rate, config.reference_sweeps) == (
        "k1:9092,k2:9092", "prod_eu", 45.0, 7.0, 3)
    assert config.client == {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "PLAIN",
                             "sasl.password": SECRET}
    assert config.judge == {"alpha": 0.02} and str(config.history) == str(tmp_path)
    assert result["verdict"] == sweep.HEALTHY and result["conn_id"] == "prod_eu"
    assert json.dumps(result)  # XCom
    (event,) = events[AssetAlias(HEALTH_ALIAS)].asset_alias_events
    assert event.dest_asset_key.uri == "kafka-canary://prod_eu/health"
    assert event.extra["verdict"] == sweep.HEALTHY and event.extra["sweep_id"] == "20270101T000000Z-abcdef"
    assert health_asset("prod_eu") == Asset("kafka-canary://prod_eu/health")
    assert set(HealthSweepOperator.template_fields) == {"kafka_canary_conn_id", "duration", "probe_rate",
                                                        "reference_sweeps", "judge_config", "history"}


class _TI:
    dag_id, run_id, task_id, map_index = "kafka_health_sweep", "manual__1", "sweep", 0

    def __init__(self, value):
        self.value = value
        self.pulled = []

    def xcom_pull(self, task_ids, map_indexes):
        self.pulled.append((task_ids, map_indexes))
        return self.value


@pytest.mark.parametrize("verdict", [sweep.DEGRADED, sweep.HEALTHY, "INCONCLUSIVE"])
def test_success_callback_alerts_only_a_degraded_cluster(tmp_path, monkeypatch, verdict):
    monkeypatch.setenv(sweep.WEBHOOK_ENV, "http://127.0.0.1:9/hooks/SECRET")  # nothing listens: reported, not raised
    operator = HealthSweepOperator(task_id="sweep", kafka_canary_conn_id="prod_eu", history=str(tmp_path))
    ti = _TI(_result(verdict, conn_id="prod_eu"))
    alert_if_degraded({"ti": ti, "task": operator})
    assert ti.pulled == [("sweep", 0)]
    alerts = tmp_path / "alerts.jsonl"
    if verdict != sweep.DEGRADED:
        assert not alerts.exists()
        return
    (line,) = alerts.read_text().splitlines()
    alert = json.loads(line)
    assert (alert["cluster"], alert["status"], alert["reason"], alert["report"]) == (
        "prod_eu", sweep.DEGRADED, "because", "/h/report.html")
    assert alert["details"] == {"dag_id": "kafka_health_sweep", "run_id": "manual__1", "task_id": "sweep",
                                "map_index": 0}


def test_failure_callback_names_the_cluster_and_the_error(tmp_path, monkeypatch):
    monkeypatch.delenv(sweep.WEBHOOK_ENV, raising=False)
    operator = HealthSweepOperator(task_id="sweep", kafka_canary_conn_id="prod_eu", history=str(tmp_path))
    alert_on_failure({"ti": _TI(None), "task": operator,
                      "exception": RuntimeError("cannot reach the cluster at k1:9092")})
    alert = json.loads((tmp_path / "alerts.jsonl").read_text())
    assert (alert["cluster"], alert["status"]) == ("prod_eu", "SWEEP_FAILED")
    assert alert["reason"] == "RuntimeError: cannot reach the cluster at k1:9092"


def test_webhook_url_from_the_environment_when_no_variable(monkeypatch):
    monkeypatch.setenv(sweep.WEBHOOK_ENV, "https://hooks.example/x")
    assert op_module.webhook_url() == "https://hooks.example/x"
    monkeypatch.delenv(sweep.WEBHOOK_ENV)
    assert op_module.webhook_url() is None
