"""Verdict rules every kind shares: a failure after the first change is a ROLLBACK verdict, and promote needs
PROMOTE (or, for INCONCLUSIVE, a person's approval)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from canary.judge import PROMOTE, ROLLBACK, Brief
from canary.rollout.core.audit import AuditAction
from canary.rollout.core.record import RunStatus, StepStatus, Verdict
from canary.rollout.core.step import RolloutError, Step

if TYPE_CHECKING:
    from canary.rollout.core.kind import RolloutKind
    from canary.rollout.core.rollout import RolloutRun


def failure_verdict(rollout: RolloutRun, step_name: str, error: object, infrastructure: bool = False) -> Verdict:
    """A step after the first change failed: the verdict is ROLLBACK, with that failure as its reason (the engine
    and the Airflow judge task both decide so); `infrastructure`: the deployer could not reach a node."""
    verdict = Verdict.failure(step_name, error, infrastructure)
    rollout.state.update(verdict=verdict, status=RunStatus.judged(verdict.verdict))
    rollout.audit.record(step_name, AuditAction.VERDICT, verdict=verdict.verdict, reason=verdict.reason, engine=None)
    return verdict


def rolls_back(step: Step, rollout: RolloutRun) -> bool:
    """Whether a failure of `step` makes the run's verdict ROLLBACK: it runs after the first change and the run has
    its snapshot (something may have changed). Otherwise nothing was changed, and the failure is the run's error."""
    return step.after_change and rollout.state.before is not None


def failed_change_verdict(kind: RolloutKind, rollout: RolloutRun) -> Verdict | None:
    """The ROLLBACK verdict of a run whose step after the first change failed, as its record says (the first such
    step; recorded now), or None when none did: what a task that runs after a failed one decides (the Airflow judge
    task), as the engine decides when the step raises."""
    for step in kind.steps:
        record = rollout.state.record.step(step.name)
        if record is not None and record.status is StepStatus.FAILED and not step.decides and rolls_back(step, rollout):
            return failure_verdict(rollout, step.name, record.error, bool(record.infrastructure))
    return None


def require_promotable(rollout: RolloutRun, approve: bool) -> None:
    """Raises unless the verdict is PROMOTE, or INCONCLUSIVE with a person's approval."""
    verdict = rollout.state.verdict.verdict if rollout.state.verdict else None
    if verdict == ROLLBACK or (verdict != PROMOTE and not approve):
        raise RolloutError(f"the verdict is {verdict or 'not reached yet'}; promote needs PROMOTE "
                           f"(or, for INCONCLUSIVE, a person's approval: --approve)")


def record_verdict(rollout: RolloutRun, verdict: Brief, **details: Any) -> dict:
    """Records the verdict of the last window in run.json (status "judged <VERDICT>") and the audit log; returns
    it as the step's result. `verdict`: the judge's brief, or a Verdict with its engine and analysis; `details`: what
    the kind adds (Verdict's fields: the probe, the traffic judged, …)."""
    result = Verdict.of_window(verdict, rollout.state.window, **details)
    rollout.state.update(verdict=result, status=RunStatus.judged(result.verdict))
    rollout.audit.record(rollout.step, AuditAction.VERDICT, verdict=result.verdict, reason=result.reason,
                         engine=result.engine)
    return result.to_dict()
