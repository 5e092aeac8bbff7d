"""The rollout's operators (operators/rollout.py). The report task reads the run's record: the outcome and exit code
come from its status (an unfinished run fails the DAG run and still leaves its summary in XCom for `kafka-canary
release`). The connection's password in an Airflow run of the rollout: it becomes sasl.password for the clients,
Airflow's secrets masker hides it in the task's log lines, and no step operator's result (XCom) or run file holds
it. A person's choice is read from the branch record too."""

from __future__ import annotations

import dataclasses
import json
import logging
from pathlib import Path

import pytest
from airflow.sdk._shared.secrets_masker import _secrets_masker
from airflow.sdk.exceptions import AirflowException
from airflow.sdk.log import mask_logs
from kafka_canary_provider.operators.rollout import AnalysisRequestOperator, PreflightOperator, RolloutReportOperator
from kafka_canary_provider.runs import run_file

from canary.cluster.state import ClusterState, NodeState
from canary.kafka.secrets import MASK
from canary.outcome import Outcome
from canary.rollout.broker import BROKER, Rollout
from canary.rollout.core import RolloutRun, RunStatus, Verdict
from canary.rollout.core.run import RunState

# ----- the report task -----


class _Run:
    """What the report task reads of a rollout: its run state, run id and run directory."""

    def __init__(self, run_dir: Path):
        self.state = RunState.open(run_dir, "r1", {"change": {"config": {"a.b": "1"}}})
        self.run_id, self.run_dir = "r1", self.state.run_dir

    local = RolloutRun.local


class _TaskInstance:
    def __init__(self) -> None:
        self.pushed: dict[str, object] = {}

    def xcom_push(self, key: str, value: object) -> None:
        self.pushed[key] = value


def _report(run: _Run) -> tuple[dict | None, _TaskInstance, Exception | None]:
    ti = _TaskInstance()
    try:
        return RolloutReportOperator(task_id="report").run_step(run, {"ti": ti}), ti, None
    except AirflowException as exc:
        return None, ti, exc


def test_a_verified_run_reports_its_outcome_and_exit_code(tmp_path):
    run = _Run(tmp_path / "run")
    run.state.update(verdict=Verdict(verdict="ROLLBACK", reason="e2e p99", engine="inline", analysis="analysis-1"),
                     status=RunStatus.VERIFIED_ROLLED_BACK)
    result, ti, failed = _report(run)
    assert failed is None and result is not None and ti.pushed == {}
    assert (result["outcome"], result["exit_code"], result["status"]) == ("ROLLBACK", 1, "verified rolled_back")
    assert (result["verdict"], result["reason"]) == ("ROLLBACK", "e2e p99")
    assert result["analysis_report"] == str(run.run_dir / "analysis-1" / "report.html")


@pytest.mark.parametrize("status, outcome", [(RunStatus.JUDGED_ROLLBACK, Outcome.UNFINISHED),
                                             (RunStatus.PREFLIGHT, Outcome.UNFINISHED),
                                             (RunStatus.JUDGED_INCONCLUSIVE, Outcome.INCONCLUSIVE)])
def test_an_unverified_run_fails_the_dag_run_and_leaves_its_outcome_for_the_release(tmp_path, status, outcome):
    run = _Run(tmp_path / "run")
    run.state.update(status=status)
    result, ti, failed = _report(run)
    assert result is None and failed is not None and f"did not finish ({outcome})" in str(failed)
    summary = ti.pushed["return_value"]
    assert isinstance(summary, dict)
    assert (summary["outcome"], summary["exit_code"], summary["status"]) == (outcome, outcome.exit_code, status)


# ----- the connection's password -----

SECRET = "s3cr3t-scram-pa55word"
RUN_ID = "manual__2027-01-01T00:00:00+00:00"
PARAMS = {"config_overrides": {"num.io.threads": "6"}, "canary_count": 1, "engine": "inline"}


@pytest.fixture
def secured_connection(monkeypatch, tmp_path):
    """A connection to a SASL_SSL cluster (its state file only: no broker is started) and a private runs folder."""
    cluster_dir = tmp_path / "cluster"
    cluster_dir.mkdir()
    nodes = [NodeState(3000, "controller", "3.9.2", 19000)]
    nodes += [NodeState(i, "broker", "3.9.2", 19000 + i, replication_port=19100 + i) for i in (1, 2, 3)]
    ClusterState("cid", str(cluster_dir), "3.9", "320m", "192m", nodes, security="sasl_ssl").save()
    client = {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "admin",
              "ssl.ca.location": str(cluster_dir / "security" / "ca.pem")}
    monkeypatch.setenv("AIRFLOW_CONN_SECURED", json.dumps({"conn_type": "kafka_canary", "password": SECRET,
                                                           "extra": {"dir": str(cluster_dir), "client": client}}))
    monkeypatch.setenv("KAFKA_CANARY_RUNS", str(tmp_path / "runs"))
    return tmp_path / "runs"


class _MaskedLines(logging.Handler):
    """A task log as Airflow writes it: every event through the SDK's mask_logs processor (the secrets masker)."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(mask_logs(None, record.levelname.lower(), {"event": record.getMessage()})["event"])


def test_the_password_is_masked_in_task_logs_and_absent_from_xcom_and_run_files(secured_connection, monkeypatch):
    seen: dict = {}

    def careless_preflight(rollout: Rollout) -> dict:
        # What a careless change could do: log the client settings, quote the password in a result.
        seen["client"] = dict(rollout.spec.client)
        logging.getLogger("canary.rollout").info("connecting with %s", rollout.spec.client)
        return {"note": f"logged in with {rollout.spec.client['sasl.password']}", "client": dict(rollout.spec.client)}

    careless = dataclasses.replace(BROKER, steps=(dataclasses.replace(BROKER.steps[0], run=careless_preflight),
                                                  *BROKER.steps[1:]))
    monkeypatch.setattr(PreflightOperator, "kind", lambda self: careless)
    masked = _MaskedLines()
    logger = logging.getLogger("canary.rollout")
    logger.addHandler(masked)
    monkeypatch.setattr(logger, "level", logging.INFO)
    try:
        result = PreflightOperator(task_id="preflight", kafka_canary_conn_id="secured").execute(
            {"run_id": RUN_ID, "params": PARAMS})
    finally:
        logger.removeHandler(masked)

    assert seen["client"]["sasl.password"] == SECRET  # the clients get it
    # Looking the connection up registered the password with Airflow's secrets masker: the log line is masked.
    assert _secrets_masker().redact(f"x {SECRET} y") == "x *** y"
    assert any("connecting with" in line and MASK in line for line in masked.lines), masked.lines
    assert not any(SECRET in line for line in masked.lines)
    # The result (XCom) and every file of the run: no password, even where a text quoted it.
    assert SECRET not in json.dumps(result) and result["note"] == "logged in with ***"
    assert result["client"]["sasl.password"] == MASK
    run_dir = secured_connection / "manual__2027-01-01T00_00_00_00_00"
    files = [p for p in run_dir.rglob("*") if p.is_file()]
    assert {p.name for p in files} >= {"run.json", "audit.jsonl", "report.html"}
    assert [p.name for p in files if SECRET.encode() in p.read_bytes()] == []


def test_the_spark_arguments_of_a_secured_run_hold_no_credentials(secured_connection):
    """The analysis request becomes SparkSubmitOperator's arguments (XCom, a command line): on a secured cluster it
    names the window's observations file, not the cluster, so Spark needs no credentials."""
    run_dir = secured_connection / "manual__2027-01-01T00_00_00_00_00"
    operator = AnalysisRequestOperator(task_id="analysis_request", kafka_canary_conn_id="secured")
    params = PARAMS | {"engine": "spark"}  # with engine: inline there are no Spark arguments (the task skips)
    rollout = operator.rollout({"run_id": RUN_ID, "params": params})
    observations = run_dir / "observations-window-1.jsonl"
    rollout.state.update(window={"attempt": 1, "probe_run_id": "p", "start_ms": 1, "end_ms": 2,
                                 "observations": str(observations), "stopped_early": None, "interim": []})

    request = operator.execute({"run_id": RUN_ID, "params": params})
    # relative to the run: the Spark task finds them in its own worker's copy of the run (the run_file macro)
    assert request["observations"] == observations.name and request["out"] == "analysis-1"
    assert run_file(rollout.run_id, request["observations"]) == str(observations)
    assert run_file(rollout.run_id, request["from_ms"]) == 1 and run_file(rollout.run_id, "") == ""
    assert SECRET not in json.dumps(request)
    assert SECRET.encode() not in (run_dir / "analysis-1" / "judge.yaml").read_bytes()


# ----- a person's choice -----

class _FakeTI:
    def __init__(self, xcoms: dict):
        self.xcoms = xcoms

    def xcom_pull(self, task_ids: str, key: str = "return_value"):
        return self.xcoms.get((task_ids, key))


@pytest.mark.parametrize(("xcoms", "expected"), [
    ({("ask", "return_value"): ["promote"]}, ["promote"]),
    ({("ask", "return_value"): "rollback"}, ["rollback"]),
    # Airflow 3.3 resumes a task parked for a person's input without its return value: the branch record decides.
    ({("ask", "skipmixin_key"): {"followed": ["promote"]}}, ["promote"]),
    ({}, []),
])
def test_a_persons_choice_is_read_from_the_branch_record_too(xcoms, expected):
    from kafka_canary_provider.operators.rollout import followed_branches

    assert followed_branches(_FakeTI(xcoms), "ask") == expected
