"""The verdict gate (operators/gate.py) routes by the judge task's verdict."""

from __future__ import annotations

import pytest

from canary.rollout.core import Verdict


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
