"""The health sweep of one cluster (canary.sweep.run_sweep) as an operator, and the alert callbacks of the health
sweep DAG.

The operator publishes the cluster's health as an asset event: for each AssetAlias among its outlets it adds an
event for `Asset("kafka-canary://<conn id>/health")` (extra: verdict, reason, sweep id, report), so the one
mapped task of the DAG publishes one Asset per cluster, and a DAG can be scheduled on a cluster's health.

Alerts: `alert_if_degraded` (on_success_callback) alerts when the sweep's verdict is DEGRADED;
`alert_on_failure` (on_failure_callback) when a sweep could not run at all (cluster unreachable, bad connection).
Both log an alert line, append to `<history root>/alerts.jsonl` and POST to the webhook of the Variable
`kafka_canary_alert_webhook` or, without it, of $KAFKA_CANARY_ALERT_WEBHOOK, when one is set (never logged).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk import Asset, AssetAlias, BaseOperator

from canary.storage import Store, open_store
from kafka_canary_provider.hooks.kafka_canary import KafkaCanaryHook
from kafka_canary_provider.hooks.run_storage import run_storage_options
from kafka_canary_provider.runs import airflow_origin, runs_store

if TYPE_CHECKING:
    from airflow.sdk import Context

HEALTH_ALIAS = "kafka-canary-health"
WEBHOOK_VARIABLE = "kafka_canary_alert_webhook"


def health_asset(conn_id: str) -> Asset:
    """The asset that stands for a cluster's health: kafka-canary://<connection id>/health."""
    return Asset(f"kafka-canary://{conn_id}/health")


class HealthSweepOperator(BaseOperator):
    """Probes one cluster for `duration`, compares with its history, keeps the history and the trend.

    :param kafka_canary_conn_id: the cluster's connection (KafkaCanaryHook); templated, mappable.
    :param duration: probe traffic, e.g. "30s" (canary.fields.parse_duration); templated.
    :param probe_rate: probe messages per second per partition; templated.
    :param reference_sweeps: healthy sweeps pooled as the reference; templated.
    :param judge_config: judge config mapping merged over canary.sweep.SWEEP_JUDGE; templated.
    :param history: history root, a directory or s3://bucket/prefix (credentials: the run storage's connection,
        $KAFKA_CANARY_RUNS_CONN_ID); default $KAFKA_CANARY_HISTORY or ~/.local/state/kafka-canary/history.
    Returns (XCom) canary.sweep's small result: cluster, verdict, reason, sweep id, report, history file, summary.
    """

    template_fields: Sequence[str] = ("kafka_canary_conn_id", "duration", "probe_rate", "reference_sweeps",
                                      "judge_config", "history")
    ui_color = "#e6f4ea"

    def __init__(self, *, kafka_canary_conn_id: str = KafkaCanaryHook.default_conn_name, duration: str | float = "30s",
                 probe_rate: float = 20.0, reference_sweeps: int = 6, judge_config: dict | None = None,
                 history: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.kafka_canary_conn_id = kafka_canary_conn_id
        self.duration = duration
        self.probe_rate = probe_rate
        self.reference_sweeps = reference_sweeps
        self.judge_config = judge_config
        self.history = history

    def execute(self, context: Context) -> dict:
        from canary.rollout.core.index import RunsIndex
        from canary.sweep import SweepConfig, run_sweep

        hook = KafkaCanaryHook(self.kafka_canary_conn_id)
        section = hook.cluster_section()
        bootstrap = hook.bootstrap_servers(section)
        # As the form gives them: the model reads a duration as text ("30s") or seconds, and checks its range.
        config = SweepConfig.model_validate({
            "bootstrap_servers": bootstrap, "cluster_name": self.kafka_canary_conn_id, "client": section["client"],
            "duration": self.duration, "rate": float(self.probe_rate), "reference_sweeps": int(self.reference_sweeps),
            "judge": dict(self.judge_config or {}), "history": self.history or None})
        self.log.info("sweeping %s (%s) for %ss at %s msg/s per partition", self.kafka_canary_conn_id, bootstrap,
                      config.duration, config.rate)
        # Listed in the runs index when its history is the one the report pages read (no `history` of its own).
        index = RunsIndex(runs_store()) if self.history is None else None
        origin = airflow_origin(context.get("dag_run"))
        result = run_sweep(config, config.history_store(run_storage_options()), index, origin).model_copy(
            update={"conn_id": self.kafka_canary_conn_id})
        self.log.info("cluster %s: %s, %s; report %s", self.kafka_canary_conn_id, result.verdict, result.reason,
                      result.report)
        asset = health_asset(self.kafka_canary_conn_id)
        extra = result.model_dump(include={"verdict", "sweep_id", "report", "history_file"}) | {
            "reason": result.reason[:500]}
        for outlet in self.outlets:
            if isinstance(outlet, AssetAlias):
                context["outlet_events"][outlet].add(asset, extra=extra)
        return result.to_dict()


def webhook_url() -> str | None:
    """The Variable kafka_canary_alert_webhook, else $KAFKA_CANARY_ALERT_WEBHOOK, else None."""
    from airflow.sdk import Variable

    from canary.sweep import WEBHOOK_ENV

    try:
        url = Variable.get(WEBHOOK_VARIABLE, default=None)
    except Exception:  # no metadata database to ask (a bare test): the environment decides
        url = None
    return url or os.environ.get(WEBHOOK_ENV) or None


def _where(context: Context) -> dict:
    ti = context["ti"]
    return {"dag_id": ti.dag_id, "run_id": ti.run_id, "task_id": ti.task_id, "map_index": ti.map_index}


def _alerts_store(task: object) -> Store:
    """The history root the task keeps its history in (where its alerts go), with the storage connection's
    credentials."""
    from canary.sweep import history_root

    return open_store(getattr(task, "history", None) or history_root(), run_storage_options())


def alert_if_degraded(context: Context) -> None:
    """on_success_callback of the sweep task: alerts when the sweep's verdict (its XCom) is DEGRADED."""
    from canary.sweep import DEGRADED, Alert, SweepBrief, send_alert

    ti = context["ti"]
    returned = ti.xcom_pull(task_ids=ti.task_id, map_indexes=ti.map_index)
    result = SweepBrief.model_validate(returned) if returned else None
    if result is None or result.verdict != DEGRADED:
        return
    task = context["task"]
    send_alert(Alert(cluster=result.conn_id or result.cluster, status=DEGRADED, reason=result.reason,
                     sweep_id=result.sweep_id, report=result.report, details=_where(context)),
               _alerts_store(task), webhook_url())


def alert_on_failure(context: Context) -> None:
    """on_failure_callback: a task of the sweep failed (the cluster could not be probed, a bad connection or
    Variable); the alert names the cluster when the task had one."""
    from canary.sweep import Alert, send_alert

    task = context["task"]
    error = context.get("exception")
    send_alert(Alert(cluster=getattr(task, "kafka_canary_conn_id", None), status="SWEEP_FAILED",
                     reason=f"{type(error).__name__}: {error}" if error else "the task failed",
                     details=_where(context)),
               _alerts_store(task), webhook_url())
