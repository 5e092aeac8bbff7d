"""Run storage on a real S3-compatible server (versitygw on 127.0.0.1) and on disk: conditional run-state writes that
never lose a step, audit appends from several processes that never lose a line, bad storage refused before the
cluster changes, and a broker rollout whose steps run as separate "workers" that share nothing but the store."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from object_store import S3Server

from canary.demo import FAST_JUDGE, GOOD_CONFIG
from canary.kafka.admin import ROLLOUT_LOCK_TOPIC
from canary.kafka.clients import admin_client
from canary.rollout.core.audit import AuditLog
from canary.rollout.core.record import RunStatus
from canary.rollout.core.run import RunState, RunStateError
from canary.storage import StoreError, open_store

pytestmark = pytest.mark.integration


@pytest.fixture(params=["file", "s3"])
def runs_url(request, tmp_path) -> str:
    """A fresh runs' root on disk, or in a fresh bucket of the real S3 server."""
    if request.param == "file":
        return (tmp_path / "runs").as_uri()
    server = request.getfixturevalue("s3_env")
    return f"s3://{server.make_bucket(f'runs-{uuid.uuid4().hex[:12]}')}/rollouts"


def test_two_tasks_writing_one_run_at_once_keep_both_steps(runs_url):
    spec = {"change": {"config": {"a": "1"}}}
    first = RunState.open(open_store(runs_url).child("r1"), "r1", spec)
    second = RunState.open(open_store(runs_url).child("r1"), "r1", spec)  # read before the first one wrote
    first.step_started("deploy-canary")
    second.step_started("warm-up")  # its write loses (the first wrote since it read): merged, written again
    first.step_finished("deploy-canary", {"restarted": [3]})
    second.step_finished("warm-up", {"in_isr": [3]})
    second.update(status=RunStatus.CANARY_DEPLOYED)

    stored = RunState.open(open_store(runs_url).child("r1"), "r1", spec).record
    assert stored.steps["deploy-canary"].result == {"restarted": [3]}
    assert stored.steps["warm-up"].result == {"in_isr": [3]}
    assert [stored.steps[s].attempts for s in ("deploy-canary", "warm-up")] == [1, 1]
    assert stored.status is RunStatus.CANARY_DEPLOYED
    with pytest.raises(RunStateError, match="different spec"):
        RunState.open(open_store(runs_url).child("r1"), "r1", {"change": {"config": {"a": "2"}}})


def test_audit_appends_from_four_processes_lose_no_line(runs_url):
    code = ("import sys; from canary.rollout.core.audit import AuditLog; from canary.storage import open_store\n"
            "log = AuditLog(open_store(sys.argv[1]).child('r1'), 'r1')\n"
            "for i in range(25): log.record('w' + sys.argv[2], 'appended', i=i)\n")
    writers = [subprocess.Popen([sys.executable, "-c", code, runs_url, str(w)]) for w in range(4)]
    assert [w.wait(300) for w in writers] == [0, 0, 0, 0]
    entries = AuditLog(open_store(runs_url).child("r1"), "r1").entries()
    assert sorted((e["step"], e["i"]) for e in entries) == sorted((f"w{w}", i) for w in range(4) for i in range(25))
    for w in range(4):  # each writer's lines read back in the order it wrote them
        assert [e["i"] for e in entries if e["step"] == f"w{w}"] == list(range(25))


def test_a_run_written_by_a_newer_version_is_refused(runs_url):
    open_store(runs_url).child("r1").write("run.json", json.dumps({"schema": 4, "run_id": "r1"}).encode())
    with pytest.raises(RunStateError, match="schema 4; this kafka-canary reads 1, 2, 3: it was written by a newer"):
        RunState.open(open_store(runs_url).child("r1"), "r1", {})


def test_deleting_a_file_and_a_folder_leaves_the_rest(runs_url):
    store = open_store(runs_url).child("history")
    for key in ("s1.parquet", "s2.parquet", "reports/s1/report.html", "reports/s1/comparison/verdict.json",
                "reports/s2/report.html"):
        store.write(key, b"x")
    store.delete("s1.parquet")
    store.delete("reports/s1")
    store.delete("reports/never-written")  # already gone: nothing to do
    fresh = Path(str(store.workdir()) + "-elsewhere")  # a machine that never had them
    store.pull(fresh)
    if fresh.exists():  # an object store: what a pull brings
        assert sorted(p.relative_to(fresh).as_posix() for p in fresh.rglob("*") if p.is_file()) == [
            "reports/s2/report.html", "s2.parquet"]
    assert store.read("s1.parquet") is None and store.read("reports/s1/report.html") is None
    assert store.read("s2.parquet") == b"x" and store.read("reports/s2/report.html") == b"x"


def test_alerts_from_two_sweeps_at_once_are_both_kept(runs_url):
    from canary.sweep import DEGRADED, Alert, send_alert

    code = ("import sys; from canary.sweep import Alert, send_alert\n"
            "send_alert(Alert('c' + sys.argv[2], 'DEGRADED', 'slow'), sys.argv[1])\n")
    senders = [subprocess.Popen([sys.executable, "-c", code, runs_url, str(i)]) for i in range(3)]
    assert [s.wait(300) for s in senders] == [0, 0, 0]
    sent = send_alert(Alert("c3", DEGRADED, "slow"), runs_url)
    assert sent["alerts_file"].endswith("alerts.jsonl") and sent["webhook"] == "not configured"
    alerts = [json.loads(line) for line in open_store(runs_url).lines("alerts.jsonl")]
    assert sorted(a["cluster"] for a in alerts) == ["c0", "c1", "c2", "c3"]


def test_the_provider_reaches_the_store_with_an_airflow_connections_credentials(s3, tmp_path, monkeypatch, caplog):
    """No AWS setting in the process: the connection $KAFKA_CANARY_RUNS_CONN_ID names holds the key, the secret
    and the endpoint. A wrong secret is refused with what to fix, and never shows in the log."""
    from kafka_canary_provider.runs import run_dir

    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("KAFKA_CANARY_RUNS", f"s3://{s3.make_bucket('conn-runs')}/runs")
    monkeypatch.setenv("KAFKA_CANARY_RUNS_CONN_ID", "canary_runs")

    def connection(secret: str) -> None:
        monkeypatch.setenv("AIRFLOW_CONN_CANARY_RUNS", json.dumps({
            "conn_type": "aws", "login": s3.access_key, "password": secret,
            "extra": {"endpoint_url": s3.endpoint, "region_name": "us-east-1"}}))

    connection(s3.secret_key)
    run = RunState.open(run_dir("r1"), "r1", {"change": {}})
    run.step_started("preflight")
    assert json.loads(open_store(run_dir("r1").url, s3_options(s3)).read("run.json"))["steps"]["preflight"]

    connection("a-wrong-secret-4d1f")
    with caplog.at_level("DEBUG"), pytest.raises(StoreError, match="refused the credentials"):
        RunState.open(run_dir("r2"), "r2", {"change": {}})
    assert "a-wrong-secret-4d1f" not in caplog.text

    monkeypatch.setenv("AIRFLOW_CONN_CANARY_RUNS", json.dumps({"conn_type": "aws", "login": s3.access_key}))
    with pytest.raises(ValueError, match="set both the login .* and the password"):
        run_dir("r3")


def _cli(*args: str, env: dict[str, str], timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "canary.cli", *args], env=env, capture_output=True, text=True,
                          timeout=timeout)


def _spec(cluster, tmp_path: Path, run_id: str) -> Path:
    spec = {"cluster": {"dir": str(cluster.directory)}, "change": {"config": GOOD_CONFIG}, "canary": {"count": 1},
            "probe": {"window": "40s", "interim_interval": "10s", "rate": 60, "preflight": "3s", "calibration": "3s"},
            "judge": {"engine": "inline", "config": FAST_JUDGE}, "timeouts": {"guard": "60s", "warm_up": "120s"},
            "capacity": "not_required", "run_id": run_id}
    path = tmp_path / f"{run_id}.json"
    path.write_text(json.dumps(spec))
    return path


def test_bad_run_storage_is_refused_before_the_cluster_changes(shared_cluster, s3, tmp_path):
    spec = _spec(shared_cluster, tmp_path, "bad-store")
    bucket = s3.make_bucket("bad-store")
    base = {**os.environ, **s3.env()}
    cases = {
        "missing bucket": ({**base, "KAFKA_CANARY_RUNS": "s3://no-such-bucket/runs"},
                           "bucket 'no-such-bucket' does not exist; create it"),
        "wrong credentials": ({**base, "KAFKA_CANARY_RUNS": f"s3://{bucket}/runs", "AWS_SECRET_ACCESS_KEY": "wrong"},
                              "the object store refused the credentials"),
        "unreachable store": ({**base, "KAFKA_CANARY_RUNS": f"s3://{bucket}/runs",
                               "AWS_ENDPOINT_URL": "http://127.0.0.1:9"}, "cannot reach the object store"),
        "unsupported store": ({**base, "KAFKA_CANARY_RUNS": "gs://bucket/runs"}, "gs:// is not supported"),
    }
    before = sorted(admin_client(shared_cluster.bootstrap_servers).list_topics(timeout=30).topics)
    for case, (env, message) in cases.items():
        done = _cli("rollout", "preflight", "--spec", str(spec), env=env, timeout=180)
        assert done.returncode == 2 and message in done.stderr, (case, done.stderr[-2000:])
        assert s3.secret_key not in done.stdout + done.stderr and "wrong" not in done.stderr.replace(
            "wrong credentials", ""), case
    after = sorted(admin_client(shared_cluster.bootstrap_servers).list_topics(timeout=30).topics)
    assert after == before and ROLLOUT_LOCK_TOPIC not in after  # no lock taken, nothing created


# make faults: test-distributed runs the same on real Celery workers over S3 in CI.
@pytest.mark.slow
def test_a_rollout_whose_steps_run_on_workers_sharing_only_the_object_store(cluster_factory, s3, tmp_path,
                                                                          monkeypatch):
    """Each step in its own process with its own HOME and work directory, alternating between two "workers": only
    the object store carries the run from one step to the next, as on Airflow workers that share no disk."""
    from fastapi.testclient import TestClient

    cluster = cluster_factory(brokers=3)
    spec = _spec(cluster, tmp_path, "distributed")
    runs = f"s3://{s3.make_bucket('distributed')}/rollouts"
    requests_before = s3.requests()
    steps = ["preflight", "deploy-canary", "warm-up", "lead", "probe-window", "judge", "promote", "verify"]
    started = time.monotonic()
    for index, step in enumerate(steps):
        worker = tmp_path / f"worker-{index % 2}-{index}"  # a fresh disk each step: nothing left by an earlier one
        env = {**os.environ, **s3.env(), "KAFKA_CANARY_RUNS": runs, "HOME": str(worker),
               "KAFKA_CANARY_WORKDIR": str(worker / "work"), "TMPDIR": str(worker / "tmp")}
        (worker / "tmp").mkdir(parents=True)
        done = _cli("rollout", step, "--spec", str(spec), "--json", env=env)
        assert done.returncode in (0, 1, 3) if step == "judge" else done.returncode == 0, (step, done.stderr[-3000:])
        if step == "judge":
            assert json.loads(done.stdout)["verdict"] == "PROMOTE", done.stdout
    took = time.monotonic() - started
    requests = s3.requests() - requests_before
    print(f"\nrollout with each step on a fresh worker, run storage on versitygw: {took:.0f} s, "
          f"{requests} object-store requests")

    store = open_store(runs, s3_options(s3)).child("distributed")
    run = json.loads(store.read("run.json") or b"{}")
    assert run["status"] == "verified promoted", run["status"]
    assert {name: (record["status"], record["attempts"]) for name, record in run["steps"].items()} == {
        name: ("done", 1) for name in steps}
    assert not Path(run["window"]["observations"]).is_absolute()  # found by relative path on any worker
    actions = [e["action"] for e in AuditLog(store, "distributed").entries()]
    assert actions.count("step finished") == len(steps) and "verdict" in actions
    cluster.reload()
    assert all(node.config.get("num.io.threads") == "6" for node in cluster.state.nodes if node.node_id < 3000)

    # The report pages read the store: the API server needs no disk shared with the workers.
    for name, value in {**s3.env(), "KAFKA_CANARY_RUNS": runs}.items():
        monkeypatch.setenv(name, value)
    from airflow.api_fastapi.core_api.security import get_user
    from kafka_canary_provider import plugin

    app = plugin.create_app()
    app.dependency_overrides[get_user] = lambda: object()
    client = TestClient(app)
    page = client.get("/runs/distributed/report.html")
    assert page.status_code == 200 and "PROMOTE" in page.text and "verified promoted" in page.text
    assert "distributed" in client.get("/").text
    assert client.get("/runs/distributed/run.json").status_code == 404


def s3_options(server: S3Server) -> dict:
    return {"key": server.access_key, "secret": server.secret_key, "endpoint_url": server.endpoint}
