"""The operator extra link from every rollout task to its run's report, served by the plugin."""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow.sdk import BaseOperatorLink

from kafka_canary_provider.runs import rollout_run_id

if TYPE_CHECKING:
    from airflow.sdk import BaseOperator
    from airflow.sdk.types import TaskInstanceKey

URL_PREFIX = "/kafka-canary"


def report_url(run_id: str, page: str = "report.html") -> str:
    """The plugin's URL of a page of the rollout `run_id` (the rollout's run id, not Airflow's)."""
    return f"{URL_PREFIX}/runs/{run_id}/{page}"


class RolloutReportLink(BaseOperatorLink):
    """"Rollout report": the run's report.html (verdict, steps, audit log, link to the analysis report)."""

    name = "Rollout report"

    def get_link(self, operator: BaseOperator, *, ti_key: TaskInstanceKey) -> str:
        return report_url(rollout_run_id(ti_key.run_id))
