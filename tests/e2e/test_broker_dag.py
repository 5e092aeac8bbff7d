"""The broker rollout DAG end to end: `airflow dags test kafka_broker_canary` on a real local cluster, every task
executed by Airflow (SQLite metadata database, the installed provider), for a bad canary: the gate decides
ROLLBACK, the rollback is verified and the cluster is exactly as before."""

from __future__ import annotations

import asyncio
import json
import subprocess

import pytest

from canary.demo import BAD_CONFIG, airflow_command, airflow_env, demo_params, run_dag_test, run_outcome

# `make faults`: the compose stack's bad release runs this DAG to a verified ROLLBACK in CI, and the live Airflow
# test runs it to PROMOTE through a person's approval.
pytestmark = [pytest.mark.integration, pytest.mark.e2e, pytest.mark.slow]


def test_bad_canary_is_rolled_back_and_verified(cluster_factory, tmp_path, monkeypatch):
    cluster = cluster_factory(brokers=3)
    cluster.reload()
    before = {n.node_id: (n.version, dict(n.config), n.rack) for n in cluster.state.nodes}
    home, runs = tmp_path / "airflow", tmp_path / "rollouts"
    home.mkdir()
    env = airflow_env(home, runs, cluster.directory)

    # The learner warm-up trigger on the real cluster: every broker is in every ISR, so it fires at once.
    from kafka_canary_provider.triggers.warm_up import LearnerWarmUpTrigger

    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_CANARY_DEFAULT", env["AIRFLOW_CONN_KAFKA_CANARY_DEFAULT"])

    async def first_event():
        async for event in LearnerWarmUpTrigger("kafka_canary_default", [1, 2, 3], timeout=60).run():
            return event.payload

    assert asyncio.run(first_event())["status"] == "in_isr"
    migrate = subprocess.run([airflow_command(), "db", "migrate"], env=env, capture_output=True, text=True,
                             timeout=600)
    assert migrate.returncode == 0, migrate.stdout[-3000:] + migrate.stderr[-3000:]

    # The idle test cluster: the probe judges alone (no load), as the bad canary needs no more.
    params = demo_params(bad=True, engine="inline", window="40s") | {"interim_interval": "10s",
                                                                      "target_version": None,
                                                                      "capacity": "not_required"}
    code = run_dag_test(env, params, tmp_path / "dags-test.log", echo=False, timeout=600)
    log = (tmp_path / "dags-test.log").read_text()

    assert code == 0, log[-5000:]
    found = run_outcome(runs)
    assert found is not None, log[-5000:]
    record, _ = found
    assert record.outcome() == "ROLLBACK" and record.status.exit_code == 1, record.status
    outcome = record.to_json()  # as run.json holds it
    assert outcome["verdict"]["verdict"] == "ROLLBACK", outcome["verdict"]
    assert outcome["status"] == "verified rolled_back", json.dumps(outcome["steps"], indent=1)[-3000:]
    assert outcome["steps"]["verify"]["status"] == "done"
    assert "promote" not in outcome["steps"]
    # The canary got the bad config during the run, and nothing of it is left.
    deploy = outcome["steps"]["deploy-canary"]["result"]
    assert deploy["rolled"] and deploy["rolled"][0]["phase"] == "canary"
    assert outcome["spec"]["change"]["config"] == BAD_CONFIG
    cluster.reload()
    assert {n.node_id: (n.version, dict(n.config), n.rack) for n in cluster.state.nodes} == before
    # Every task of the run ended the way the DAG promises, as Airflow recorded it.
    assert "[DAG TEST] end task task_id=report" in log
    assert (runs / outcome["run_id"] / "report.html").exists()
