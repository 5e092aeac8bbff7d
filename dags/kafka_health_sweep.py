"""The scheduled health sweep (docs/design.md): every registered cluster is probed, compared with its own history,
published as an asset and alerted on when DEGRADED. Everything a sweep does is canary.sweep.run_sweep, reachable
with `kafka-canary sweep …` too."""

from __future__ import annotations

import os
from datetime import datetime, timedelta

from airflow.sdk import AssetAlias, Variable, dag, task
from kafka_canary_provider.forms import params_from_form
from kafka_canary_provider.operators.sweep import (
    HEALTH_ALIAS,
    HealthSweepOperator,
    alert_if_degraded,
    alert_on_failure,
)

from canary.forms import SWEEP_FORM

CLUSTERS_VARIABLE = "kafka_canary_sweep_clusters"
DEFAULT_CLUSTERS = ["kafka_canary_default"]
# The schedule is fixed when the DAG is parsed; an environment variable changes it without editing the file.
SCHEDULE = os.environ.get("KAFKA_CANARY_SWEEP_SCHEDULE", "@hourly")

DOC = """
### Kafka health sweep

Every hour, for each registered cluster: a short probe (default 30 s), compared with the cluster's recent healthy
sweeps and checked against the judge's SLO guards → **HEALTHY**, **DEGRADED** or **INCONCLUSIVE**.

* **Clusters**: the Variable `kafka_canary_sweep_clusters`, a JSON list of connection ids (type `kafka_canary`);
  default `["kafka_canary_default"]`. The *Clusters* param of a manual run overrides it. One mapped `sweep` task
  per cluster.
* **History and trend**: one Parquet file per sweep under `$KAFKA_CANARY_HISTORY/<connection id>/` (the Spark
  job's history rows); each sweep's `report.html`, `result.json` and `trend.png` under `reports/<sweep id>/`.
* **Assets**: each sweep publishes `kafka-canary://<connection id>/health` through the alias `kafka-canary-health`
  (extra: verdict, reason, sweep id, report); schedule a DAG on either.
* **Alerts**: a DEGRADED cluster (and a sweep that could not run) is logged as an alert line, appended to
  `$KAFKA_CANARY_HISTORY/alerts.jsonl` and POSTed as JSON to the webhook in the Variable
  `kafka_canary_alert_webhook` (or `$KAFKA_CANARY_ALERT_WEBHOOK`) when set.

The same sweep without Airflow: `kafka-canary sweep --bootstrap-servers HOST:PORT --cluster-name NAME`.
"""


@dag(
    dag_id="kafka_health_sweep",
    schedule=SCHEDULE,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    max_active_runs=1,
    doc_md=DOC,
    tags=["kafka", "canary", "health"],
    default_args={"retries": 0, "on_failure_callback": alert_on_failure},
    # Params reach the operator through templates; native rendering keeps numbers numbers and mappings mappings.
    render_template_as_native_obj=True,
    params=params_from_form(SWEEP_FORM),
)
def kafka_health_sweep():
    @task
    def registered_clusters(params: dict | None = None) -> list[str]:
        """The connection ids to sweep: the run's Clusters param, else the Variable, else the default."""
        chosen = list((params or {}).get("clusters") or [])
        if not chosen:
            chosen = Variable.get(CLUSTERS_VARIABLE, default=DEFAULT_CLUSTERS, deserialize_json=True)
        if not isinstance(chosen, list) or not chosen or not all(isinstance(c, str) and c for c in chosen):
            raise ValueError(f"Variable {CLUSTERS_VARIABLE} must be a non-empty JSON list of connection ids, "
                             f"got {chosen!r}")
        return list(dict.fromkeys(chosen))

    sweeps = HealthSweepOperator.partial(
        task_id="sweep",
        duration="{{ params.duration }}",
        probe_rate="{{ params.probe_rate }}",
        reference_sweeps="{{ params.reference_sweeps }}",
        judge_config="{{ params.judge_config }}",
        outlets=[AssetAlias(HEALTH_ALIAS)],
        on_success_callback=alert_if_degraded,
        execution_timeout=timedelta(minutes=15),
    ).expand(kafka_canary_conn_id=registered_clusters())

    @task(trigger_rule="all_done")
    def summary(results) -> dict:
        """One line per cluster in the log; the clusters by verdict (a cluster whose sweep failed has none)."""
        import logging

        log = logging.getLogger("kafka_health_sweep")
        from canary.sweep import SweepBrief

        by_verdict: dict[str, list[str]] = {}
        for returned in results[:]:  # one request for every mapped result, rather than one per item
            if returned:
                result = SweepBrief.model_validate(returned)
                by_verdict.setdefault(result.verdict, []).append(result.conn_id or result.cluster)
                log.info("%s: %s, %s", result.conn_id, result.verdict, result.reason)
        return by_verdict

    summary(sweeps.output)


health_sweep_dag = kafka_health_sweep()

if __name__ == "__main__":
    health_sweep_dag.test()
