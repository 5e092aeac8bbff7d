"""The broker rollout on a distributed Airflow: CeleryExecutor on Redis (Debian's redis-server), metadata in Debian's
PostgreSQL, two Celery workers that share no directory, the run storage on a real S3 server (versitygw, see
tests/object_store.py), the analysis on a Spark standalone cluster started from pyspark's own scripts. Triggered
through the REST API by the release hook, as a release pipeline does:

- a change is rolled out with every step on the other worker than the step before it (the task instances'
  hostnames and queues, and each worker's own log, say which ran what);
- a worker is killed (SIGKILL, with everything it started) while it runs the probe window; its task is retried on the
  other worker once that one takes over its queue;
- the verdict cannot decide (capacity required, not judged): the DAG asks a person, `release --follow` says so and
  exits 3; the person approves in the human-in-the-loop API (what the UI's Required actions page calls), and the
  rollout converges: promoted and verified, nothing lost;
- the report page is served from the object store, in headless Chromium behind Airflow's login, and says the
  release pipeline started the run; the DAG run's "Canary report" tab leads to it.

One rollout shows all of it: the steps alternate up to the kill and all run on the survivor after it. `make
test-distributed` runs it (CI does, after `make test`, which leaves it out: it takes about 8 minutes). A verdict the
gate reaches by itself on Spark standalone in a live Airflow is the compose stack's (`make test-compose`).
"""

from __future__ import annotations

import json
import time

import pytest
import requests
from celery_airflow import CeleryAirflow
from live_airflow import (
    DAG,
    answer,
    api,
    check_report_in_browser,
    release,
    task_instances,
    task_logs,
    task_timeline,
    timeline,
    xcom,
)
from object_store import s3_server
from services import postgres, redis, spark_standalone

from canary.demo import FAST_JUDGE
from canary.storage import open_store

pytestmark = [pytest.mark.integration, pytest.mark.distributed]
# Consecutive rollout steps alternate between the two workers' queues (gate tasks go where they fall).
CHAIN = ["preflight", "deploy_canary", "warm_up", "lead", "probe_window", "analysis_request", "spark_analysis",
         "judge", "promote", "verify", "report"]
QUEUES = {task: "queue_a" if i % 2 == 0 else "queue_b" for i, task in enumerate(CHAIN)} | {
    "route_verdict": "queue_a", "verdict_promote": "queue_b", "verdict_rollback": "queue_b",
    "ask_a_person": "queue_a", "rollback": "queue_a"}
WORKER = {"queue_a": "worker-a", "queue_b": "worker-b"}
RUN = "distributed_1"
# The demo's judge (canary.demo.FAST_JUDGE), probed at 50 messages/s, in a 40 s window: the verdict is undecidable
# by design, so the window need only outlast the kill and the error rates' 25 s after the warm-up. The probe's
# latencies are not judged, nor the brokers' metrics (a busy machine's swings must not decide here), and the
# cluster carries no traffic of its own, so capacity (required) is not judged: the verdict is INCONCLUSIVE and a
# person decides.
UNDECIDABLE = FAST_JUDGE | {"metrics": {m: {"enabled": False} for m in (
    "e2e_latency_p50", "e2e_latency_p95", "e2e_latency_p99", "produce_latency_p99")}}
PARAMS = {"judge_config": UNDECIDABLE, "on_inconclusive": "ask", "probe_rate": 50, "preflight_probe": "3s",
          "calibration_probe": "12s", "interim_interval": "20s", "capacity": "required", "load_rate": 0,
          "broker_metrics": {"enabled": False}}


def _trigger(airflow: CeleryAirflow, run_id: str, threads: int):
    """The release hook starts the rollout and returns; `release --follow` waits for it."""
    args = ["--cluster", "kafka_canary_default", "--config", f"num.io.threads={threads}", "--window", "40s",
            "--engine", "spark", "--run-id", run_id, "--poll", "3",
            *[a for k, v in PARAMS.items() for a in ("--param", f"{k}={json.dumps(v)}")]]
    return release(airflow.stack, *args, timeout=300)


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

            # A good change, each step on the other worker than the step before, until worker a dies while it runs
            # the probe window; worker b takes over its queue and the task is retried there.
            started = time.monotonic()
            triggered = _trigger(airflow, RUN, threads=6)
            assert triggered.returncode == 0, triggered.stdout[-2000:] + triggered.stderr[-2000:]
            deadline = time.monotonic() + 900
            while task_instances(airflow.stack, RUN).get("probe_window", {}).get("state") != "running":
                assert time.monotonic() < deadline, "the probe window never started"
                time.sleep(3)
            time.sleep(15)  # well inside the 40 s window
            airflow.kill_worker("worker-a")
            airflow.add_queue("worker-b", "queue_a")
            # The verdict cannot decide: release says a person must, and exits 3.
            asked = release(airflow.stack, "--follow", RUN, "--poll", "3", timeout=1500)
            assert asked.returncode == 3, (asked.stdout[-3000:] + asked.stderr[-3000:],
                                           _run_state(s3, bucket, RUN).get("verdict"))
            assert "a person must decide" in asked.stdout, asked.stdout
            judged = xcom(airflow.stack, RUN, "judge")
            assert judged["verdict"] == "INCONCLUSIVE", judged
            # The person approves a few seconds later, as a person would: an answer within a second of the task
            # parking races the scheduler's bookkeeping in Airflow 3.3 (the DAG retries the question if it loses).
            time.sleep(5)
            answer(airflow.stack, RUN, "Promote")
            followed = release(airflow.stack, "--follow", RUN, "--poll", "3", timeout=900)
            state = _run_state(s3, bucket, RUN)
            print(f"\ndistributed rollout, trigger to verified: {time.monotonic() - started:.1f} s\n{timeline(state)}\n"
                  f"{task_timeline(airflow.stack, RUN)}")
            # The verdict's reason is gone with the run's storage once the test ends: the message carries it.
            assert followed.returncode == 0, (followed.stdout[-3000:] + followed.stderr[-3000:], state.get("steps"),
                                              task_logs(airflow.stack, RUN, "ask_a_person", "promote"))
            assert "PROMOTE" in followed.stdout and "  promote: success" in followed.stdout, followed.stdout
            chosen = xcom(airflow.stack, RUN, "ask_a_person", "skipmixin_key")
            assert "promote" in str(chosen) and "rollback" not in str(chosen)  # the person's branch, as Airflow kept it
            assert _threads(cluster) == {"6"}

            tis = task_instances(airflow.stack, RUN)
            assert [t for t in CHAIN if tis[t]["state"] == "success"] == CHAIN, {t: tis[t]["state"] for t in CHAIN}
            killed = CHAIN.index("probe_window")
            before, after = CHAIN[:killed], CHAIN[killed + 1:]
            for task in CHAIN:
                assert tis[task]["queue"] == QUEUES[task], tis[task]
            for task in before:
                assert tis[task]["hostname"] == WORKER[QUEUES[task]], tis[task]
            assert all(tis[a]["hostname"] != tis[b]["hostname"] for a, b in zip(before, before[1:], strict=False))
            assert {tis[task]["hostname"] for task in after} == {"worker-b"}, {t: tis[t]["hostname"] for t in after}
            tries = _tries(airflow, RUN, "probe_window")
            assert [t["hostname"] for t in tries][:1] == ["worker-a"] and tries[-1]["hostname"] == "worker-b", tries
            assert tries[-1]["state"] == "success" and len(tries) >= 2
            # "Executing workload in Celery: … log_path='…'": each worker's own log says which steps it ran.
            logs = {name: worker.log.read_text() for name, worker in airflow.workers.items()}
            ran = {name: {t for t in CHAIN if f"run_id={RUN}/task_id={t}/attempt=" in log}
                   for name, log in logs.items()}
            assert ran["worker-a"] == {t for t in before if QUEUES[t] == "queue_a"} | {"probe_window"}, ran
            assert ran["worker-b"] == {t for t in before if QUEUES[t] == "queue_b"} | {"probe_window", *after}, ran
            state = _run_state(s3, bucket, RUN)
            assert state["verdict"]["verdict"] == "INCONCLUSIVE" and state["verdict"]["engine"] == "spark"
            assert state["steps"]["verify"]["status"] == "done"
            assert state["steps"]["probe-window"]["attempts"] >= 2

            # The report, from the object store, through the API server's plugin: private without Airflow's login;
            # the DAG run's "Canary report" tab leads to it; in a browser it says who started the run and how it
            # ended.
            report = f"/kafka-canary/runs/{RUN}/report.html"
            assert requests.get(airflow.stack.url + report, timeout=30).status_code in (401, 403)
            tab = api(airflow.stack, "GET", f"/kafka-canary/dag-runs/{DAG}/{RUN}", allow_redirects=False)
            assert (tab.status_code, tab.headers.get("location")) == (307, report)
            check_report_in_browser(airflow.stack, RUN, "INCONCLUSIVE", "promoted",
                                    f"Started by the release pipeline, by {airflow.stack.username}")
        finally:
            airflow.stop()
