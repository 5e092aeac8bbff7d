"""One operator per step of the broker rollout (docs/design.md). Each builds the rollout of this DAG run —
`BROKER.open(spec, $KAFKA_CANARY_RUNS/<run id>)`, the spec from the DAG's params and the cluster connection —
runs its step of the rollout kind, rewrites the run's report and returns the step's small JSON result (XCom).
Steps converge, so a retried task does only what is still missing."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator

from kafka_canary_provider.hooks.kafka_canary import KafkaCanaryHook
from kafka_canary_provider.links import RolloutReportLink, report_url
from kafka_canary_provider.runs import airflow_origin, rollout_run_id, run_dir, spec_from_params

if TYPE_CHECKING:
    from airflow.sdk import Context

    from canary.rollout.broker import Rollout
    from canary.rollout.core import RolloutKind, RolloutRun



def _jsonable(result: Any) -> Any:
    return json.loads(json.dumps(result, default=str))


class RolloutStepOperator(BaseOperator):
    """Base of the step operators.

    :param kafka_canary_conn_id: the cluster's connection (KafkaCanaryHook); templated.
    :param rollout_params: the trigger-form values the spec is built from; default: the DAG run's params.
    """

    template_fields: Sequence[str] = ("kafka_canary_conn_id", "rollout_params")
    operator_extra_links = (RolloutReportLink(),)
    ui_color = "#e8f0fe"

    def __init__(self, *, kafka_canary_conn_id: str = KafkaCanaryHook.default_conn_name,
                 rollout_params: dict | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.kafka_canary_conn_id = kafka_canary_conn_id
        self.rollout_params = rollout_params

    step: str = ""  # the name of the kind's step this operator runs, unless run_step is overridden

    def kind(self) -> RolloutKind:
        """The rollout kind of this operator's steps (imported here: DAG files parse without the library)."""
        from canary.rollout.broker import BROKER

        return BROKER

    def spec_source(self, params: dict, cluster: dict, run_id: str) -> dict:
        """The spec mapping the kind loads, from the trigger form's values and the cluster connection."""
        return spec_from_params(params, cluster, run_id)

    def rollout(self, context: Context) -> RolloutRun:
        run_id = rollout_run_id(context["run_id"])
        cluster = KafkaCanaryHook(self.kafka_canary_conn_id).cluster_section()
        params = dict(self.rollout_params or context["params"])
        rollout = self.kind().open(self.spec_source(params, cluster, run_id), run_dir(run_id))
        origin = airflow_origin(context.get("dag_run"), params)
        if origin is not None:
            rollout.state.started_by(origin)
        return rollout

    def run_step(self, rollout: RolloutRun, context: Context) -> dict:
        return self.kind().step(self.step)(rollout)

    def execute(self, context: Context) -> dict:

        since_ms = int(time.time() * 1000)
        rollout = self.rollout(context)
        self.log.info("rollout %s in %s; report %s", rollout.run_id, rollout.run_dir, report_url(rollout.run_id))
        try:
            result = self.run_step(rollout, context)
        finally:
            rollout.state.ran_in(self.task_id, since_ms)
            rollout.write_report()
        return _jsonable(result)


class PreflightOperator(RolloutStepOperator):
    """Health, features, lock, a green baseline probe; records the pre-rollout state. Changes nothing."""

    step = "preflight"


class DeployCanaryOperator(RolloutStepOperator):
    """Rolls the canary brokers to the change, one at a time under the safe-roll guard."""

    step = "deploy-canary"


class LeadOperator(RolloutStepOperator):
    """Moves leadership of the canary partitions to the canary brokers."""

    step = "lead"


class ProbeWindowOperator(RolloutStepOperator):
    """Probe traffic for the window with interim looks; a critical regression stops it early (fail fast).

    The probe produces and consumes in this worker for the whole window, so it is not a trigger: a trigger must
    have no side effects and may run twice."""

    step = "probe-window"


def broker_run(rollout: RolloutRun) -> Rollout:
    """The broker kind's run: the broker DAG's own steps are given nothing else."""
    from canary.rollout.broker import Rollout

    if not isinstance(rollout, Rollout):
        raise TypeError(f"a broker rollout's step was given a {type(rollout).__name__}")
    return rollout


class AnalysisRequestOperator(RolloutStepOperator):
    """The Spark job's arguments for the last probe window ({observations, from_ms, to_ms, run_id, out, config});
    skipped when the window already stopped early with a fail-fast verdict (nothing left to analyse), and with
    engine: inline (the judge task analyses in-process; the Spark task, skipped, never resolves its jars)."""

    def run_step(self, rollout: RolloutRun, context: Context) -> dict:
        from airflow.sdk.exceptions import AirflowSkipException

        from canary.rollout.broker.verdict import analysis_request

        rollout = broker_run(rollout)
        window = rollout.state.window
        if window is not None and window.stopped_early is not None:
            raise AirflowSkipException(f"the window stopped early: {window.stopped_early.reason}")
        if rollout.spec.judge.engine == "inline":
            raise AirflowSkipException("engine: inline; the judge task analyses the window in-process")
        # Files relative to the run: the Spark task may run on another worker, which finds them in its own work
        # directory for the run (the DAG's run_file macro).
        return {key: rollout.relative(value) if isinstance(value, str) and value.startswith("/") else value
                for key, value in analysis_request(rollout).items()}


class JudgeOperator(RolloutStepOperator):
    """The verdict of the window: the fail-fast one, else the Spark job's verdict.json (or the inline judge).
    A missing or failed analysis is INCONCLUSIVE, never PROMOTE.

    Runs after a failed step too (trigger rule all_done): when a step after the first change failed, the verdict
    is ROLLBACK with that failure as its reason, as `kafka-canary rollout run` decides; when nothing was changed
    yet, it fails and nothing is rolled back."""

    def run_step(self, rollout: RolloutRun, context: Context) -> dict:
        from canary.rollout.core.verdict import failed_change_verdict

        kind = self.kind()
        failed = failed_change_verdict(kind, rollout)
        if failed is not None:
            self.log.warning("a step failed after the first change; the verdict is ROLLBACK: %s", failed.reason)
            return failed.to_dict()
        return kind.step("judge")(rollout)


def followed_branches(ti, task_id: str) -> list[str]:
    """The task ids a branch task (a person's human-in-the-loop choice) followed: its return value, else the record
    SkipMixin keeps of every branch decision — Airflow 3.3 resumes a human-in-the-loop task parked for input
    without pushing its return value."""
    chosen = ti.xcom_pull(task_ids=task_id)
    if not chosen:
        chosen = (ti.xcom_pull(task_ids=task_id, key="skipmixin_key") or {}).get("followed")
    return [chosen] if isinstance(chosen, str) else list(chosen or [])


class PromoteOperator(RolloutStepOperator):
    """Rolls the rest of the fleet, the controllers last, probes (finalize is its own task, after the bake): every
    wave, or with `wave` the waves up to that one and the look after it (the DAG's task per wave; the last wave
    brings the controllers). A task whose wave the plan does not have is skipped, as is every wave after a look
    that rolled the promotion back.

    :param approved_by: task id of the person's decision (a HITL branch); an INCONCLUSIVE verdict is promoted
        only when that task chose this task (the first wave's); the later waves follow that approval.
    :param wave: this task's wave (1 …); None: every wave.
    """

    template_fields: Sequence[str] = (*RolloutStepOperator.template_fields, "approved_by")

    def __init__(self, *, approved_by: str | None = None, wave: int | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.approved_by = approved_by
        self.wave = wave

    def run_step(self, rollout: RolloutRun, context: Context) -> dict:
        from airflow.sdk.exceptions import AirflowSkipException

        from canary.rollout.broker.promote import wave_skipped

        approve = False
        if self.approved_by:
            approve = self.task_id in followed_branches(context["ti"], self.approved_by)
            if approve:
                self.log.info("a person approved promoting through %s", self.approved_by)
        if self.wave is None:
            return self.kind().promote(rollout, approve=approve)
        skipped = wave_skipped(broker_run(rollout), self.wave)
        if skipped:
            raise AirflowSkipException(skipped)
        return self.kind().promote(rollout, approve=approve, through_wave=self.wave)


class RollbackOperator(RolloutStepOperator):
    """Brings every changed broker back to the pre-rollout version, config and rack. A failed rollback fails the
    task saying which brokers are not back, that the lock is still held and what to do (as `rollout run` does)."""

    step = "rollback"

    def run_step(self, rollout: RolloutRun, context: Context) -> dict:
        from canary.rollout.core.engine import roll_back

        return roll_back(self.kind(), rollout)


class FinalizeOperator(RolloutStepOperator):
    """Raises the feature levels once the verified promoted fleet has baked (`promote.bake`), after a clean look.
    Skipped when the rollout was not promoted, and while the fleet still bakes: the DAG run ends without
    finalizing, and clearing this task once the bake is over (or `kafka-canary rollout finalize`) finalizes."""

    def run_step(self, rollout: RolloutRun, context: Context) -> dict:
        from airflow.sdk.exceptions import AirflowSkipException

        from canary.rollout.broker.finalize import not_due

        run = broker_run(rollout)
        waiting = not_due(run)
        if waiting:
            raise AirflowSkipException(f"{waiting}; clear this task then, or run `kafka-canary rollout finalize`")
        return self.kind().step("finalize")(run)


class VerifyOperator(RolloutStepOperator):
    """Checks the promised state (promoted or exactly as before), probes, releases the lock."""

    step = "verify"


class RolloutReportOperator(RolloutStepOperator):
    """Writes the run's report and returns where it is, with the run's summary (canary.rollout.core.RunSummary:
    outcome, exit_code, status, verdict, reason, run_dir, report) and "analysis_report", "url". Fails (after
    writing it, and with the summary in XCom all the same, where `kafka-canary release` reads the outcome) when the
    rollout did not finish verified, so the DAG run fails too."""

    def run_step(self, rollout: RolloutRun, context: Context) -> dict:
        record = rollout.state.record
        summary = record.summary(str(rollout.run_dir), str(rollout.run_dir / "report.html"))
        analysis = record.verdict.analysis if record.verdict else None
        result = summary.to_dict() | {
            "analysis_report": str(rollout.local(analysis) / "report.html") if analysis else None,
            "url": report_url(rollout.run_id)}
        self.log.info("rollout %s: %s; report %s", rollout.run_id, summary.line(), summary.report)
        if not record.status.verified:
            # The report is written either way; the DAG run fails, so nobody reads an unfinished rollout as done.
            from airflow.sdk.exceptions import AirflowException

            context["ti"].xcom_push(key="return_value", value=result)
            raise AirflowException(f"the rollout did not finish ({summary.outcome}): it is at '{record.status}'; "
                                   f"see {summary.report}")
        return result
