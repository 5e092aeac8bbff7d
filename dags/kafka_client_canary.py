"""The gated rollout of a producer/consumer service's new version (the client side of canary isolation) as an
Airflow DAG. The tasks are thin: everything they do is in canary.rollout.client, reachable with
`kafka-canary client-rollout …` too."""

from __future__ import annotations

import os
from datetime import timedelta
from typing import Any

from airflow.sdk import chain, dag
from kafka_canary_provider.forms import params_from_form
from kafka_canary_provider.operators.client_rollout import (
    ClientDeployCanaryOperator,
    ClientJudgeOperator,
    ClientPreflightOperator,
    ClientPromoteOperator,
    ClientReportOperator,
    ClientRollbackOperator,
    ClientVerifyOperator,
    ClientWindowOperator,
    OpenLaneOperator,
)
from kafka_canary_provider.operators.gate import verdict_gate
from kafka_canary_provider.runs import rollout_run_id

from canary.forms import CLIENT_FORM

# The broker rollout's pool: a client rollout moves partition leadership, so it must not overlap a broker rollout.
CLUSTER_POOL = os.environ.get("KAFKA_CANARY_POOL", "kafka_canary_default")
CONN = "{{ params.cluster_conn_id }}"

DOC = """
### Gated rollout of a Kafka client service

preflight → open the canary lane (canary partitions led by a canary broker) → deploy the canary instances on the
new version → window (interim looks, fail fast) → judge (the service's own observations, canary lane vs
baseline) → **PROMOTE**: baseline instances to the new version, close the lane, stop the canaries ·
**ROLLBACK**: canary producers stop, canary consumers drain, the lane closes, the baseline takes the canary
partitions over at the committed offsets · **INCONCLUSIVE**: a person decides → verify → report.

The same steps run without Airflow: `kafka-canary client-rollout run --spec client-rollout.yaml`
(docs/clients.md).
"""


@dag(
    dag_id="kafka_client_canary",
    schedule=None,
    catchup=False,
    max_active_runs=1,
    doc_md=DOC,
    tags=["kafka", "canary", "rollout", "clients"],
    default_args={"retries": 2, "retry_delay": timedelta(seconds=10)},
    user_defined_macros={"rollout_run_id": rollout_run_id},
    params=params_from_form(CLIENT_FORM),
)
def kafka_client_canary():
    steps: dict[str, Any] = {"kafka_canary_conn_id": CONN, "pool": CLUSTER_POOL}
    preflight = ClientPreflightOperator(task_id="preflight", **steps)
    open_lane = OpenLaneOperator(task_id="open_lane", **steps)
    deploy = ClientDeployCanaryOperator(task_id="deploy_canary", **steps)
    window = ClientWindowOperator(task_id="window", **steps)
    # Runs after a failed step too: a failure after the first change is a ROLLBACK verdict.
    judge = ClientJudgeOperator(task_id="judge", trigger_rule="all_done", **steps)
    to_promote, to_rollback = verdict_gate(
        judge,
        subject="Client canary INCONCLUSIVE for {{ params.service_name }} {{ params.to_version }}: promote?",
        body="{{ ti.xcom_pull(task_ids='judge')['reason'] }}\n\n"
             "Report: /kafka-canary/runs/{{ rollout_run_id(run_id) }}/report.html",
    )
    promote = ClientPromoteOperator(task_id="promote", approved_by="ask_a_person",
                                    trigger_rule="none_failed_min_one_success", **steps)
    rollback = ClientRollbackOperator(task_id="rollback", trigger_rule="none_failed_min_one_success", **steps)
    verify = ClientVerifyOperator(task_id="verify", trigger_rule="none_failed_min_one_success", **steps)
    report = ClientReportOperator(task_id="report", trigger_rule="all_done", kafka_canary_conn_id=CONN, retries=0)

    chain(preflight, open_lane, deploy, window, judge)
    to_promote >> promote
    to_rollback >> rollback
    [promote, rollback] >> verify >> report


client_canary_dag = kafka_client_canary()

if __name__ == "__main__":
    client_canary_dag.test()
