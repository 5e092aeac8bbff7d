"""The gated rollout of a producer/consumer service's new version (the client side of canary isolation) as an
Airflow DAG. The tasks are thin: everything they do is in canary.rollout.client, reachable with
`kafka-canary client-rollout …` too."""

from __future__ import annotations

import os
from datetime import timedelta

from airflow.sdk import Param, chain, dag
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

# The broker rollout's pool: a client rollout moves partition leadership, so it must not overlap a broker rollout.
CLUSTER_POOL = os.environ.get("KAFKA_CANARY_POOL", "kafka_canary_default")
CONN = "{{ params.cluster_conn_id }}"
NAME = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$"
DURATION = r"^\d+(\.\d+)?(ms|s|m|h)?$"

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
    params={
        "cluster_conn_id": Param("kafka_canary_default", type="string", minLength=1, title="Cluster connection",
                                 description="Airflow connection (type kafka_canary) of the service's cluster"),
        "service_name": Param("orders", type="string", pattern=NAME, title="Service",
                              description="The service; its instances are named <service>-producer-0, …"),
        "topic": Param("orders", type="string", pattern=r"^[A-Za-z0-9._-]{1,249}$", title="Topic",
                       description="The topic the service produces to and consumes from"),
        "group": Param("orders-billing", type="string", pattern=NAME, title="Consumer group",
                       description="The consumers' group id (their committed offsets)"),
        "fleet_dir": Param("", type="string", minLength=1, title="Fleet directory",
                           description="The service deployer's directory: instance state, logs"),
        "producers": Param(1, type="integer", minimum=0, maximum=64, title="Baseline producer instances",
                           description="Producer instances of the baseline lane (a canary one is added)"),
        "consumers": Param(2, type="integer", minimum=0, maximum=64, title="Baseline consumer instances",
                           description="Consumer instances of the baseline lane (a canary one is added)"),
        "rate": Param(20, type="number", exclusiveMinimum=0, maximum=10000, title="Records/s per producer",
                      description="The sample producer's rate (records per second per instance)"),
        "from_version": Param("v1", type="string", pattern=NAME, title="Current version",
                              description="The version every instance runs before the rollout"),
        "to_version": Param("v2", type="string", pattern=NAME, title="New version",
                            description="The version the canary instances get, then the fleet"),
        "canary_partitions": Param(1, type="integer", minimum=1, maximum=10000, title="Canary partitions",
                                   description="How many of the topic's partitions the canary lane gets"),
        "window": Param("60s", type="string", pattern=DURATION, title="Window",
                        description="How long the lanes are compared, e.g. 60s or 5m"),
        "interim_interval": Param("15s", type="string", pattern=DURATION, title="Interim look interval",
                                  description="Time between interim looks that can stop the window early"),
        "judge_config": Param({}, type="object", title="Judge config",
                              description="Judge thresholds; empty uses the client rollout's defaults"),
        "engine": Param("spark", type="string", enum=["spark", "inline"], title="Analysis engine",
                        description="spark: the Spark analysis job decides; inline: the judge in-process"),
        "on_inconclusive": Param("ask", type="string", enum=["ask", "rollback"], title="On INCONCLUSIVE",
                                 description="ask: a person approves or rejects (rollback after 4 h)"),
    },
)
def kafka_client_canary():
    steps = {"kafka_canary_conn_id": CONN, "pool": CLUSTER_POOL}
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


dag = kafka_client_canary()

if __name__ == "__main__":
    dag.test()
