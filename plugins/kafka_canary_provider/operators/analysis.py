"""The final analysis as a SparkSubmitOperator running spark_jobs/canary_analysis.py.

The job's exit code is its verdict (0 PROMOTE, 1 ROLLBACK, 3 INCONCLUSIVE, 2 error). A verdict is not a
failure of the task: when the job wrote its verdict.json, exit 1 and 3 succeed, and the judge task reads it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk.exceptions import AirflowException

from kafka_canary_provider.links import RolloutReportLink

if TYPE_CHECKING:
    from airflow.sdk import Context


class CanaryAnalysisSubmitOperator(SparkSubmitOperator):
    """SparkSubmitOperator for the canary analysis job.

    :param verdict_file: where the job writes its verdict (templated; `<--out>/verdict.json`).
    :param run_id: the rollout's run id (templated): the run's files are brought from the run storage to this
        worker before the job, and what the job wrote is sent back after it, for the judge on any worker.
    Every other argument is SparkSubmitOperator's (application, application_args, jars, env_vars, conn_id …).
    """

    template_fields: Sequence[str] = (*SparkSubmitOperator.template_fields, "verdict_file", "run_id")
    operator_extra_links = (RolloutReportLink(),)

    def __init__(self, *, verdict_file: str, run_id: str = "", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.verdict_file = verdict_file
        self.run_id = run_id

    # The verdict is the task's XCom value: Airflow keeps what execute returns, whatever the base class declares.
    def execute(self, context: Context) -> dict | None:  # type: ignore[override]
        from kafka_canary_provider.runs import run_dir

        store = run_dir(self.run_id) if self.run_id else None
        if store is not None:
            store.pull(store.workdir())
        verdict_file = Path(self.verdict_file)
        verdict_file.unlink(missing_ok=True)  # a retried analysis must not read an older try's verdict
        try:
            super().execute(context)
        except AirflowException:
            if not verdict_file.exists():
                raise
            self.log.info("the job exited non-zero with its verdict written; a verdict is not a task failure")
        finally:
            if store is not None:
                store.push(store.workdir())  # the verdict, or the job's log for whoever looks into a failure
        from canary.judge import Brief

        judged = Brief.of(json.loads(verdict_file.read_text()))
        self.log.info("analysis verdict %s", judged.line())
        return {"verdict": judged.verdict, "reason": judged.reason, "verdict_file": str(verdict_file)}
