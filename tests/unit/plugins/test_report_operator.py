"""The report task and the verdict gate read the run's record: the outcome and exit code come from its status (an
unfinished run fails the DAG run and still leaves its summary in XCom for `kafka-canary release`), and the gate
routes by the judge task's verdict."""

from __future__ import annotations

from pathlib import Path

import pytest
from airflow.sdk.exceptions import AirflowException
from kafka_canary_provider.operators.rollout import RolloutReportOperator

from canary.outcome import Outcome
from canary.rollout.core import RolloutRun, RunStatus, Verdict
from canary.rollout.core.run import RunState


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


@pytest.mark.parametrize("verdict, on_inconclusive, branch", [
    ("PROMOTE", None, "verdict_promote"), ("ROLLBACK", "ask", "verdict_rollback"),
    ("INCONCLUSIVE", "ask", "ask_a_person"), ("INCONCLUSIVE", "rollback", "verdict_rollback")])
def test_the_gate_routes_by_the_judge_tasks_verdict(verdict, on_inconclusive, branch):
    from kafka_canary_provider.operators import gate

    judged = Verdict(verdict=verdict, reason="r", engine="inline").to_dict()  # the judge task's result
    assert _route_verdict(gate)(judged, {"on_inconclusive": on_inconclusive}) == branch


def _route_verdict(gate_module):
    """The function of the route_verdict task that verdict_gate adds (called here without Airflow running it)."""
    from airflow.sdk import DAG

    with DAG("gate_test", schedule=None):
        from airflow.providers.standard.operators.empty import EmptyOperator

        judge = EmptyOperator(task_id="judge")
        gate_module.verdict_gate(judge, subject="s", body="b")
        task = judge.dag.get_task("route_verdict")
    return task.python_callable
