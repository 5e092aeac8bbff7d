"""The gated broker rollout of docs/design.md as an Airflow DAG (the tasks are thin: everything they do is in
canary.rollout.broker, reachable with `kafka-canary rollout …` too)."""

from __future__ import annotations

import os
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

from airflow.sdk import chain, dag
from kafka_canary_provider.forms import params_from_form
from kafka_canary_provider.operators.analysis import CanaryAnalysisSubmitOperator
from kafka_canary_provider.operators.gate import verdict_gate
from kafka_canary_provider.operators.rollout import (
    AnalysisRequestOperator,
    DeployCanaryOperator,
    FinalizeOperator,
    JudgeOperator,
    LeadOperator,
    PreflightOperator,
    ProbeWindowOperator,
    PromoteOperator,
    RollbackOperator,
    RolloutReportOperator,
    VerifyOperator,
)
from kafka_canary_provider.operators.warm_up import LearnerWarmUpOperator
from kafka_canary_provider.runs import rollout_run_id, run_file

from canary.forms import BROKER_FORM
from canary.rollout.broker.spec import MAX_WAVES

REPO = Path(__file__).resolve().parents[1]
ANALYSIS_JOB = str(REPO / "spark_jobs" / "canary_analysis.py")
# One pool per cluster keeps rollouts on the same cluster apart across DAGs; the pool is fixed when the DAG is
# parsed, so this DAG uses the default cluster's (create it with one slot: `airflow pools set ...`).
CLUSTER_POOL = os.environ.get("KAFKA_CANARY_POOL", "kafka_canary_default")
CONN = "{{ params.cluster_conn_id }}"


def _request(key: str) -> str:
    """A template for one field of the analysis_request task's XCom (the Spark job's arguments)."""
    return f"{{{{ ti.xcom_pull(task_ids='analysis_request')['{key}'] }}}}"


def _request_file(key: str) -> str:
    """A file of the run in that XCom, as its path on the worker that renders the template (run_file)."""
    return f"{{{{ run_file(rollout_run_id(run_id), ti.xcom_pull(task_ids='analysis_request')['{key}']) }}}}"


def _kafka_connector_jars() -> str:
    """Spark's Kafka source jars (resolved from Maven Central once, cached); called when the task renders."""
    from canary.analysis.connector import kafka_connector_jars

    return ",".join(str(j) for j in kafka_connector_jars())


DOC = """
### Gated Kafka broker rollout

preflight → deploy canary → learner warm-up → lead → probe window (interim gates) → Spark analysis → judge →
**PROMOTE**: promote the fleet in gated waves (`promote.waves`: a look after each but the last; a regression rolls
the promoted waves back; `kafka-canary rollout pause` holds it before the next wave; controllers last) ·
**ROLLBACK**: canary brokers back to baseline ·
**INCONCLUSIVE**: a person decides in *Required actions* (no answer within 4 h → rollback; or
`on_inconclusive = rollback` to never ask) → verify → finalize → report. *finalize* raises the feature levels (the
one step no rollback undoes) only once the promoted fleet has baked (`promote.bake`, 10 min by default): until then
it is skipped, and clearing it after the bake finalizes.

One rollout per cluster at a time (`max_active_runs=1`, the cluster pool, and a lock topic on the cluster).
Every task links to the run's report (*Rollout report*); all reports are under *Browse → Canary rollouts*.
The same steps run without Airflow: `kafka-canary rollout run --spec rollout.yaml`.
"""


@dag(
    dag_id="kafka_broker_canary",
    schedule=None,
    catchup=False,
    max_active_runs=1,
    doc_md=DOC,
    tags=["kafka", "canary", "rollout"],
    # Every step converges from the real cluster, so a retry is safe: it reads the cluster again and does only what is
    # still missing (a leader that moved while a broker was slow, a task runner the API server answered too late).
    default_args={"retries": 2, "retry_delay": timedelta(seconds=10)},
    user_defined_macros={"kafka_connector_jars": _kafka_connector_jars, "rollout_run_id": rollout_run_id,
                         "run_file": run_file},
    params=params_from_form(BROKER_FORM),
)
def kafka_broker_canary():
    steps: dict[str, Any] = {"kafka_canary_conn_id": CONN, "pool": CLUSTER_POOL}
    preflight = PreflightOperator(task_id="preflight", **steps)
    deploy = DeployCanaryOperator(task_id="deploy_canary", **steps)
    warm_up = LearnerWarmUpOperator(task_id="warm_up", **steps)
    lead = LeadOperator(task_id="lead", **steps)
    probe = ProbeWindowOperator(task_id="probe_window", **steps)
    request = AnalysisRequestOperator(task_id="analysis_request", **steps)
    analysis = CanaryAnalysisSubmitOperator(
        task_id="spark_analysis",
        conn_id="spark_default",
        application=ANALYSIS_JOB,
        name="kafka-canary-analysis",
        application_args=[
            "--observations", _request_file("observations"),
            "--from", _request("from_ms"),
            "--to", _request("to_ms"),
            "--run-id", _request("run_id"),
            "--config", _request_file("config"),
            "--out", _request_file("out"),
            "--before", _request_file("before"),
        ],
        verdict_file=_request_file("out") + "/verdict.json",
        run_id="{{ rollout_run_id(run_id) }}",
        jars="{{ kafka_connector_jars() }}",
        conf={"spark.ui.enabled": "false", "spark.pyspark.python": sys.executable,
              "spark.sql.shuffle.partitions": "8"},
        env_vars={"PYTHONPATH": str(REPO), "PYSPARK_PYTHON": sys.executable},
    )
    # The judge runs when the analysis failed or was skipped too: it then decides from the fail-fast look, or
    # INCONCLUSIVE — a failed analysis never promotes.
    judge = JudgeOperator(task_id="judge", trigger_rule="all_done", **steps)

    to_promote, to_rollback = verdict_gate(
        judge,
        subject="Kafka canary INCONCLUSIVE on {{ params.cluster_conn_id }}: promote or roll back?",
        body="{{ ti.xcom_pull(task_ids='judge')['reason'] }}\n\n"
             "Report: /kafka-canary/runs/{{ rollout_run_id(run_id) }}/report.html",
    )
    # Either way in: the verdict's own branch, or the person's choice.
    # One task per wave of the promotion (promote.waves): the first takes the person's approval; a wave the plan
    # does not have is skipped, and so is each one after a look that rolled the promotion back.
    promote = PromoteOperator(task_id="promote", approved_by="ask_a_person", wave=1,
                              trigger_rule="none_failed_min_one_success", **steps)
    waves = [PromoteOperator(task_id=f"promote_wave_{n}", wave=n, **steps) for n in range(2, MAX_WAVES + 1)]
    rollback = RollbackOperator(task_id="rollback", trigger_rule="none_failed_min_one_success", **steps)
    verify = VerifyOperator(task_id="verify", trigger_rule="none_failed_min_one_success", **steps)
    finalize = FinalizeOperator(task_id="finalize", **steps)
    # The report fails the DAG run on purpose when the rollout did not end verified: once is enough.
    report = RolloutReportOperator(task_id="report", trigger_rule="all_done", kafka_canary_conn_id=CONN, retries=0)

    chain(preflight, deploy, warm_up, lead, probe, request, analysis, judge)
    to_promote >> promote
    chain(promote, *waves)
    to_rollback >> rollback
    [promote, *waves, rollback] >> verify >> finalize >> report


broker_canary_dag = kafka_broker_canary()

if __name__ == "__main__":
    broker_canary_dag.test()
