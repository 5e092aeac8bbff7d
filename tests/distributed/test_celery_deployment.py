"""The broker rollout on a distributed Airflow: CeleryExecutor on Redis (Debian's redis-server), metadata in Debian's
PostgreSQL, two Celery workers that share no directory, the run storage on a real S3 server (versitygw, see
tests/object_store.py), the analysis on a Spark standalone cluster started from pyspark's own scripts. Triggered
through the REST API by the release hook, as a release pipeline does:

- a good change is promoted and verified while every step runs on the other worker than the step before it
  (the task instances' hostnames and queues, and each worker's own log, say which ran what);
- then a worker is killed (SIGKILL, with everything it started) while it runs the probe window; its task is retried
  on the other worker once that one takes over its queue, and the rollout still converges, nothing lost;
- the report page is served from the object store, in headless Chromium behind Airflow's login.

`make test-distributed` runs it (CI does, after `make test`, which leaves it out: it takes about 7 minutes).
"""

from __future__ import annotations

import json
import time

import pytest
from celery_airflow import CeleryAirflow
from live_airflow import api, check_report_in_browser, release
from object_store import s3_server
from services import postgres, redis, spark_standalone

from canary.demo import FAST_JUDGE
from canary.storage import open_store

pytestmark = [pytest.mark.integration, pytest.mark.distributed]
DAG = "kafka_broker_canary"
# Consecutive rollout steps alternate between the two workers' queues (gate tasks go where they fall).
CHAIN = ["preflight", "deploy_canary", "warm_up", "lead", "probe_window", "analysis_request", "spark_analysis",
         "judge", "promote", "verify", "report"]
QUEUES = {task: "queue_a" if i % 2 == 0 else "queue_b" for i, task in enumerate(CHAIN)} | {
    "route_verdict": "queue_a", "verdict_promote": "queue_b", "verdict_rollback": "queue_b",
    "ask_a_person": "queue_a", "rollback": "queue_a"}
WORKER = {"queue_a": "worker-a", "queue_b": "worker-b"}
# The demo's window (canary.demo.demo_params): enough probe traffic for the judge in a minute; the cluster carries
# no traffic of its own, so the probe alone judges (capacity: not_required).
PARAMS = {"judge_config": FAST_JUDGE, "probe_rate": 50, "preflight_probe": "3s", "calibration_probe": "12s",
          "interim_interval": "20s", "capacity": "not_required"}


def _rollout(airflow: CeleryAirflow, run_id: str, threads: int, wait: bool = True):
    args = ["--cluster", "kafka_canary_default", "--config", f"num.io.threads={threads}", "--window", "60s",
            "--engine", "spark", "--run-id", run_id, "--poll", "3",
            *[a for k, v in PARAMS.items() for a in ("--param", f"{k}={json.dumps(v)}")]]
    return release(airflow.stack, *args, *(["--wait"] if wait else []), timeout=1500)


def _task_instances(airflow: CeleryAirflow, run_id: str) -> dict[str, dict]:
    listed = api(airflow.stack, "GET", f"/api/v2/dags/{DAG}/dagRuns/{run_id}/taskInstances",
                 params={"limit": 100}).json()["task_instances"]
    return {ti["task_id"]: ti for ti in listed}


def _tries(airflow: CeleryAirflow, run_id: str, task_id: str) -> list[dict]:
    return api(airflow.stack, "GET", f"/api/v2/dags/{DAG}/dagRuns/{run_id}/taskInstances/{task_id}/tries"
               ).json()["task_instances"]


def _threads(cluster) -> set[str | None]:
    cluster.reload()
    return {dict(n.config).get("num.io.threads") for n in cluster.state.nodes if n.node_id < 3000}


def _run_state(s3, bucket: str, run_id: str) -> dict:
    """run.json as the store holds it (read here with the server's keys)."""
    store = open_store(f"s3://{bucket}/runs", {"endpoint_url": s3.endpoint, "key": s3.access_key,
                                               "secret": s3.secret_key}).child(run_id)
    return json.loads(store.read("run.json"))


def test_a_rollout_on_celery_workers_sharing_no_disk_promotes_and_survives_a_killed_worker(cluster_factory,
                                                                                          tmp_path):
    cluster = cluster_factory(brokers=3)
    with s3_server(tmp_path / "s3") as s3, postgres() as database, redis(tmp_path) as broker, \
            spark_standalone(tmp_path / "spark") as spark:
        bucket = s3.make_bucket("canary-runs")
        # The workers and the API server reach the store with an Airflow connection's credentials, no AWS setting.
        storage = {"KAFKA_CANARY_RUNS_CONN_ID": "canary_runs", "AIRFLOW_CONN_CANARY_RUNS": json.dumps({
            "conn_type": "aws", "login": s3.access_key, "password": s3.secret_key,
            "extra": {"endpoint_url": s3.endpoint, "region_name": "us-east-1"}})}
        airflow = CeleryAirflow.start(tmp_path / "deployment", f"s3://{bucket}/runs", cluster.directory,
                                      database_url=database.sqlalchemy_url(), broker_url=broker, spark_master=spark,
                                      queues=QUEUES, extra_env=storage)
        try:
            airflow.start_worker("worker-a", ["queue_a"])
            airflow.start_worker("worker-b", ["queue_b"])
            airflow.stack.wait_ready(timeout=600)

            # 1. A good change, every step on the other worker than the step before.
            started = time.monotonic()
            promoted = _rollout(airflow, "distributed_1", threads=6)
            print(f"\ndistributed rollout, trigger to verified: {time.monotonic() - started:.1f} s")
            # The verdict's reason is gone with the run's storage once the test ends: the message carries it.
            assert promoted.returncode == 0, (promoted.stdout[-3000:] + promoted.stderr[-3000:],
                                              _run_state(s3, bucket, "distributed_1").get("verdict"))
            assert "PROMOTE" in promoted.stdout
            assert _threads(cluster) == {"6"}
            tis = _task_instances(airflow, "distributed_1")
            ran = [t for t in CHAIN if tis[t]["state"] == "success"]
            assert ran == CHAIN, {t: tis[t]["state"] for t in CHAIN}
            for task in CHAIN:
                assert tis[task]["queue"] == QUEUES[task] and tis[task]["hostname"] == WORKER[QUEUES[task]], tis[task]
            assert all(tis[a]["hostname"] != tis[b]["hostname"] for a, b in zip(CHAIN, CHAIN[1:], strict=False))
            for name, worker in airflow.workers.items():  # "Executing workload in Celery: … log_path='…'"
                log = worker.log.read_text()
                executed = {t for t in CHAIN if f"run_id=distributed_1/task_id={t}/attempt=" in log}
                assert executed == {t for t in CHAIN if WORKER[QUEUES[t]] == name}, (name, log[-3000:])
            state = _run_state(s3, bucket, "distributed_1")
            assert state["verdict"]["verdict"] == "PROMOTE" and state["steps"]["verify"]["status"] == "done"

            # 2. Worker a dies while it runs the probe window; worker b takes over its queue, the task is retried.
            follow = _rollout(airflow, "distributed_2", threads=8, wait=False)
            assert follow.returncode == 0, follow.stdout[-2000:] + follow.stderr[-2000:]
            deadline = time.monotonic() + 900
            while _task_instances(airflow, "distributed_2").get("probe_window", {}).get("state") != "running":
                assert time.monotonic() < deadline, "the probe window never started"
                time.sleep(3)
            time.sleep(15)  # well inside the 60 s window
            airflow.kill_worker("worker-a")
            airflow.add_queue("worker-b", "queue_a")
            followed = release(airflow.stack, "--follow", "distributed_2", "--poll", "3", timeout=1500)
            assert followed.returncode == 0, (followed.stdout[-3000:] + followed.stderr[-3000:],
                                              _run_state(s3, bucket, "distributed_2").get("verdict"))
            assert "PROMOTE" in followed.stdout and _threads(cluster) == {"8"}
            tries = _tries(airflow, "distributed_2", "probe_window")
            assert [t["hostname"] for t in tries][:1] == ["worker-a"] and tries[-1]["hostname"] == "worker-b", tries
            assert tries[-1]["state"] == "success" and len(tries) >= 2
            state = _run_state(s3, bucket, "distributed_2")
            assert state["verdict"]["verdict"] == "PROMOTE" and state["steps"]["verify"]["status"] == "done"
            assert state["steps"]["probe-window"]["attempts"] >= 2

            # 3. The report, from the object store, through the API server's plugin, in a browser.
            check_report_in_browser(airflow.stack, "distributed_1", "PROMOTE")
        finally:
            airflow.stop()
