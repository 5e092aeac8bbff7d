"""The bad-input matrix (tests/reliability/bad_inputs.py), case by case: each bad input gets a clear error that
says what to fix, or is counted and excluded, never a traceback or a silent pass; and nothing on the cluster
changes. Cases that reach a cluster run against the session's real `shared_cluster` and compare its nodes
(pids, versions, configs, racks), topics and finalized features before and after."""

from __future__ import annotations

import json
import os
import random
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from canary.errors import CanaryError
from canary.kafka import features
from canary.kafka.admin import ROLLOUT_LOCK_TOPIC
from canary.kafka.clients import admin_client

from .bad_inputs import CASES, DOC, ERROR_CODES, Case, Cli, MissingFile, Obs, RawSpec, render

# The cases on a real cluster judge no latency: they run beside the unit tests (pytest -n 2).
pytestmark = pytest.mark.parallel

KAFKA_CANARY = str(Path(sys.executable).parent / "kafka-canary")
NO_CLUSTER = "/nonexistent/kafka-canary-cluster"
# Small enough data for the judge to decide: the good run below is PROMOTE, so an exclusion is visibly not silent.
JUDGE = {"warmup_s": 5, "bucket_s": 5, "min_buckets": 2,
         "metrics": {name: {"min_samples": 50} for name in (
             "e2e_latency_p50", "e2e_latency_p95", "e2e_latency_p99", "produce_latency_p99", "produce_error_rate",
             "consume_error_rate", "loss_rate", "duplicate_rate", "out_of_order_rate", "availability", "throughput")}}
# A 30-s window this judge can pass (the default judge's warm-up alone is 30 s: such a spec is refused).
GOOD_SPEC = {"change": {"config": {"num.io.threads": "6"}}, "canary": {"count": 1},
             "probe": {"window": "30s", "interim_interval": "10s", "preflight": "3s", "calibration": "3s"},
             "judge": {"engine": "inline", "config": JUDGE}}
# The password of every case that puts credentials in a URL: never printed.
SECRET = "s3cret"
# Errors a person can act on; anything else (TypeError, KeyError, …) is a crash.
DELIBERATE = (CanaryError, ValueError)


def _param(case: Case):
    return pytest.param(case, id=case.id, marks=[pytest.mark.integration] if case.cluster else [])


def test_enough_distinct_cases():
    assert len(CASES) >= 25
    assert len({c.id for c in CASES}) == len(CASES)
    assert {c.entry for c in CASES} == {"trigger form", "rollout spec", "CLI", "connection extras", "observations"}


def test_docs_table_is_current():
    assert DOC.exists() and DOC.read_text() == render(), (
        "docs/bad-inputs.md is stale: run .venv/bin/python tests/reliability/bad_inputs.py --write")


@pytest.mark.parametrize("case", [_param(c) for c in CASES])
def test_bad_input(case: Case, request, tmp_path, monkeypatch):
    cluster = request.getfixturevalue("shared_cluster") if case.cluster else None
    before = cluster_view(cluster) if cluster else None
    RUNNERS[case.entry](case, request, tmp_path, monkeypatch, cluster)
    if cluster:
        after = cluster_view(cluster)
        assert ROLLOUT_LOCK_TOPIC not in after["topics"]
        assert after == before, "the bad input changed the cluster"


def cluster_view(cluster) -> dict:
    """What a refused rollout must leave as it was: every node (pid, version, config, rack, state, delay), the
    topics (no probe topic created, no lock taken) and the finalized feature levels."""
    status = cluster.status()
    topics = sorted(admin_client(status.bootstrap_servers).list_topics(timeout=15).topics)
    return {"nodes": [n.to_dict() for n in status.nodes], "healthy": status.health.healthy, "topics": topics,
            "finalized": features.describe(status.bootstrap_servers).finalized}


# ----- the trigger form -----

@pytest.fixture(scope="module")
def broker_dag():
    """The broker rollout DAG as the API server holds it (serialized and back), whose params validate a run's
    conf before the run is created."""
    from airflow.dag_processing.dagbag import DagBag
    from airflow.serialization.serialized_objects import DagSerialization

    bag = DagBag(dag_folder=str(Path(__file__).resolve().parents[2] / "dags" / "kafka_broker_canary.py"))
    assert bag.import_errors == {}
    return DagSerialization.from_dict(DagSerialization.to_dict(bag.dags["kafka_broker_canary"]))


def run_form(case: Case, request, tmp_path, monkeypatch, cluster) -> None:
    from airflow.exceptions import ParamValidationError

    params = request.getfixturevalue("broker_dag").params.deep_merge(case.input)
    if not case.stage:
        with pytest.raises(ParamValidationError) as refused:
            params.validate()
        assert case.expect in str(refused.value)
        return
    values = params.validate()  # the form lets it through: the run's first task must refuse it
    from kafka_canary_provider.operators.rollout import PreflightOperator

    directory = str(cluster.directory) if cluster else NO_CLUSTER
    monkeypatch.setenv("AIRFLOW_CONN_BAD_INPUT_CLUSTER",
                       json.dumps({"conn_type": "kafka_canary", "extra": {"deployer": "local", "dir": directory}}))
    monkeypatch.setenv("KAFKA_CANARY_RUNS", str(tmp_path / "runs"))
    task = PreflightOperator(task_id="preflight", kafka_canary_conn_id="bad_input_cluster")
    with pytest.raises(DELIBERATE) as refused:
        task.execute({"run_id": f"manual__{case.id}", "params": values})
    assert case.expect in str(refused.value)


# ----- the rollout spec -----

def _spec(fragment: dict, cluster) -> dict:
    return {"cluster": {"dir": str(cluster.directory) if cluster else NO_CLUSTER}, **GOOD_SPEC, **fragment}


def run_spec(case: Case, request, tmp_path, monkeypatch, cluster) -> None:
    from canary.rollout.broker import BROKER, Rollout
    from canary.rollout.broker.spec import load_spec
    from canary.rollout.core.spec import SpecError

    if isinstance(case.input, MissingFile):
        source = "/nonexistent/rollout.yaml"
    elif isinstance(case.input, RawSpec):
        source = tmp_path / "rollout.yaml"
        source.write_text(case.input.text)
    else:
        source = _spec(case.input, cluster)
    if not case.stage:
        with pytest.raises(SpecError) as refused:
            load_spec(source)
        assert case.expect in str(refused.value)
        return
    rollout = Rollout(load_spec(source), tmp_path / "run")
    with pytest.raises(CanaryError) as refused:
        BROKER.step("preflight")(rollout)
    assert case.expect in str(refused.value)
    state = json.loads((tmp_path / "run" / "run.json").read_text())
    assert state["steps"]["preflight"]["status"] == "failed" and state["before"] is None


# ----- the CLIs -----

def run_cli(case: Case, request, tmp_path, monkeypatch, cluster) -> None:
    cli: Cli = case.input
    argv = []
    busy = socket.socket()  # `{busy-port}`: a port another process listens on
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    request.addfinalizer(busy.close)
    theirs = tmp_path / "theirs"  # `{theirs}`: another tool's directory, to be left exactly as it was
    theirs.mkdir()
    (theirs / "report.html").write_text("<p>another tool's report</p>")
    (theirs / "audit.jsonl").write_text('{"their": "entry"}\n')
    left_alone = _files(theirs)
    decided = None
    for arg in cli.argv:
        if arg == "{spec}":
            arg = str(tmp_path / "rollout.yaml")
            Path(arg).write_text(json.dumps(_spec(cli.spec or {}, cluster)))
        if arg == "{huge}":  # a 50 MB spec (sparse: nothing reads it whole)
            arg = str(tmp_path / "huge.yaml")
            with open(arg, "wb") as huge:
                huge.truncate(50 * 1024 * 1024)
        if arg == "{empty}":
            arg = str(tmp_path / "empty.jsonl")
            Path(arg).write_text("")
        if arg == "{rolled-back}":
            arg = str(tmp_path / "run")
            decided = _rolled_back_run(tmp_path / "rollout.yaml", tmp_path / "run")
        arg = arg.replace("{busy-port}", str(busy.getsockname()[1])).replace("{theirs}", str(theirs))
        argv.append(str(tmp_path / "out") if arg == "{tmp}" else arg)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW_API_TOKEN", "AIRFLOW_USERNAME",
                                                                     "AIRFLOW_PASSWORD", "AIRFLOW_URL"))}
    done = subprocess.run([KAFKA_CANARY, *argv], env=env | cli.env, cwd=tmp_path, capture_output=True, text=True,
                          timeout=300)
    err = done.stderr.strip()
    assert SECRET not in done.stdout + done.stderr, "a password in an argument was echoed"
    if cli.code not in ERROR_CODES:  # a verdict: on stdout, and nothing else anywhere
        assert done.returncode == cli.code and err == "", (done.returncode, done.stdout, err)
        assert done.stdout.startswith(case.expect) and len(done.stdout.splitlines()) == 2, done.stdout
        return
    assert done.returncode == cli.code, (done.returncode, done.stdout, err)
    assert "Traceback" not in err and "\n" not in err, err
    assert err.startswith("error: ") and case.expect in err, err
    assert _files(theirs) == left_alone, "another tool's directory was written to"
    if decided is not None:  # the run that decided ROLLBACK gained no step and kept its verdict
        now = json.loads((tmp_path / "run" / "run.json").read_text())
        assert (now["steps"], now["verdict"]) == (decided["steps"], decided["verdict"])


def _files(directory: Path) -> dict[str, bytes]:
    return {p.relative_to(directory).as_posix(): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


def _rolled_back_run(spec_file: Path, run_dir: Path) -> dict:
    """The issue's run in `run_dir`: its canary roll was cut off (deploy-canary failed, the verdict ROLLBACK) and its
    rollback failed, broker 2 left stopped. Returns its run.json."""
    from canary.rollout.broker.spec import load_spec
    from canary.rollout.core import RunStatus, Verdict
    from canary.rollout.core.run import RunState

    spec = load_spec(spec_file)
    state = RunState.open(run_dir, spec.effective_run_id, spec.to_dict())
    error = "ssh: connect to host k2 port 22: Connection refused"
    for name, status in (("preflight", "done"), ("deploy-canary", "failed"), ("rollback", "failed")):
        state.step_started(name)
        if status == "done":
            state.step_finished(name, {})
        else:
            state.step_failed(name, error)
    state.update(before={"brokers": {}, "controllers": {}, "features": {}}, canary_brokers=[2],
                 status=RunStatus.JUDGED_ROLLBACK, verdict=Verdict.failure("deploy-canary", error))
    return state.record.to_json()


# ----- the connection's extras -----

def run_connection(case: Case, request, tmp_path, monkeypatch, cluster) -> None:
    from kafka_canary_provider.hooks.kafka_canary import KafkaCanaryHook

    monkeypatch.setenv("AIRFLOW_CONN_BAD_INPUT", json.dumps({"conn_type": "kafka_canary", **case.input}))
    with pytest.raises(ValueError) as refused:
        KafkaCanaryHook("bad_input").cluster_section()
    assert "connection bad_input: " in str(refused.value) and case.expect in str(refused.value)


# ----- observations -----

def _record(lane: str, seq: int, send: int, rng: random.Random) -> dict:
    return {"run_id": "bad-inputs", "kind": "probe", "source": "probe-0", "topic": "__kafka_canary",
            "partition": 0 if lane == "canary" else 1, "leader": 3 if lane == "canary" else 1, "lane": lane,
            "producer_id": "p", "message_id": f"{lane}-{seq}", "seq": seq, "send_ts": send,
            "ack_ts": send + rng.randint(2, 4), "receive_ts": send + rng.randint(5, 9), "outcome": "delivered",
            "error": None, "processing_ms": None, "lag": None, "schema": 1}


def _time(value, record: dict, now_ms: int):
    """`now+1d`: a day after now; `send-500`: 500 ms before the record's send time; anything else as it is."""
    if value == "now+1d":
        return now_ms + 86_400_000
    if isinstance(value, str) and value.startswith("send"):
        return record["send_ts"] + int(value[4:])
    return value


def _resolve(record: dict, overrides: dict, now_ms: int) -> dict:
    out = dict(record)
    if "send_ts" in overrides:
        out["send_ts"] = _time(overrides["send_ts"], out, now_ms)
    out.update({k: _time(v, out, now_ms) for k, v in overrides.items() if k != "send_ts"})
    return out


def observation_lines(obs: Obs, now_ms: int) -> list[str]:
    """60 s of a good run at 10 messages/s per lane, ten minutes ago, plus the case's bad records."""
    rng = random.Random(7)
    start = now_ms - 600_000
    lines = []
    for lane in obs.lanes:
        for seq in range(600):
            record = _record(lane, seq, start + seq * 100, rng)
            if obs.edit and obs.edit[0] == lane:
                record = _resolve(record, obs.edit[1], now_ms)
            lines.append(json.dumps(record))
    for n, bad in enumerate(obs.add):
        lines.append(bad if isinstance(bad, str) else
                     json.dumps(_resolve(_record("canary", 10_000 + n, start + 30_000, rng), bad, now_ms)))
    return lines


def _check_verdict(case: Case, verdict: dict, engine: str) -> None:
    where = f"{engine}: {verdict['verdict']}: {verdict['reason']}"
    if case.excluded:
        assert verdict["data_quality"]["excluded"].get(case.expect) == case.excluded, (where, verdict["data_quality"])
        assert f"{case.expect} {case.excluded}" in verdict["reason"], where
        # Only the bad records went: the good run is still judged, and still promoted.
        lanes = verdict["lanes"]
        assert lanes["canary"]["observations"] == lanes["baseline"]["observations"] > 500, (where, lanes)
        assert verdict["verdict"] == "PROMOTE", where
    else:
        assert verdict["verdict"] == "INCONCLUSIVE" and case.expect in verdict["reason"], where


def run_observations(case: Case, request, tmp_path, monkeypatch, cluster) -> None:
    from canary.analysis import AnalysisRequest, job, write_judge_config
    from canary.judge.config import config_from_dict
    from canary.rollout import judging

    path = tmp_path / "observations.jsonl"
    path.write_text("\n".join(observation_lines(case.input, int(time.time() * 1000))) + "\n")
    config = config_from_dict(JUDGE)

    # The inline judge: the rollout's interim looks and `engine: inline`.
    judging.inline_verdict(path, tmp_path / "inline", config)
    inline = json.loads((tmp_path / "inline" / "verdict.json").read_text())
    _check_verdict(case, inline, "inline judge")

    # The Spark job, as spark-submit runs it (extract, parse, transform, judge, report).
    out = tmp_path / "spark"
    analysis = AnalysisRequest(path, out, config=write_judge_config(config, tmp_path / "judge.yaml"))
    verdict = job.run(request.getfixturevalue("spark"), analysis)
    _check_verdict(case, verdict, "Spark job")
    assert verdict["data_quality"]["excluded"] == inline["data_quality"]["excluded"]
    assert json.loads((out / "verdict.json").read_text())["reason"] == verdict["reason"]
    assert case.expect in (out / "report.html").read_text()


RUNNERS = {"trigger form": run_form, "rollout spec": run_spec, "CLI": run_cli, "connection extras": run_connection,
           "observations": run_observations}


def test_the_good_run_is_promoted_without_exclusions(tmp_path):
    """The control for the observation cases: without the bad records, nothing is excluded or named."""
    from canary.judge.config import config_from_dict
    from canary.rollout import judging

    path = tmp_path / "observations.jsonl"
    path.write_text("\n".join(observation_lines(Obs(), int(time.time() * 1000))) + "\n")
    judging.inline_verdict(path, tmp_path / "inline", config_from_dict(JUDGE))
    verdict = json.loads((tmp_path / "inline" / "verdict.json").read_text())
    assert verdict["verdict"] == "PROMOTE" and verdict["data_quality"]["excluded_total"] == 0
    assert "excluded" not in verdict["reason"]
