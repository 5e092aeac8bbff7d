"""The tasks between a rollout's judge and its promote/rollback, shared by the broker and client DAGs: the verdict
routes to promote or rollback, and INCONCLUSIVE asks a person (human-in-the-loop) unless the run said not to."""

from __future__ import annotations

from datetime import timedelta

from airflow.providers.standard.operators.empty import EmptyOperator
from airflow.providers.standard.operators.hitl import HITLBranchOperator
from airflow.sdk import task

APPROVAL_TIMEOUT = timedelta(hours=4)


def verdict_gate(judge, *, subject: str, body: str, timeout: timedelta = APPROVAL_TIMEOUT) -> tuple[list, list]:
    """Adds route_verdict → verdict_promote | verdict_rollback | ask_a_person after `judge` (call inside a DAG).
    Returns the tasks the promote task follows and those the rollback task follows. The person's task is
    `ask_a_person`, with options Promote / Roll back (default Roll back when `timeout` passes)."""

    @task.branch(task_id="route_verdict")
    def route_verdict(verdict: dict, params: dict | None = None) -> str:
        from canary.judge import INCONCLUSIVE, PROMOTE, Brief

        judged = Brief.of(verdict)  # the judge task's result: the run's verdict (canary.rollout.core.Verdict)
        if judged.verdict == PROMOTE:
            return "verdict_promote"
        if judged.verdict == INCONCLUSIVE and (params or {}).get("on_inconclusive") == "ask":
            return "ask_a_person"
        return "verdict_rollback"

    verdict_promote = EmptyOperator(task_id="verdict_promote")
    verdict_rollback = EmptyOperator(task_id="verdict_rollback")
    ask = HITLBranchOperator(
        task_id="ask_a_person",
        subject=subject,
        body=body,
        options=["Promote", "Roll back"],
        options_mapping={"Promote": "promote", "Roll back": "rollback"},
        defaults=["Roll back"],
        response_timeout=timeout,
        # Airflow 3.3 can fail a task parked for input when the answer lands before the scheduler saw it park
        # (its executor event then contradicts the resumed state): asking again beats failing the rollout.
        retries=2,
        retry_delay=timedelta(seconds=5),
    )
    route_verdict(judge.output) >> [verdict_promote, verdict_rollback, ask]
    return [verdict_promote, ask], [verdict_rollback, ask]
