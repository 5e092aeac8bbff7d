"""Verdict rules every kind shares: a failure after the first change is a ROLLBACK verdict, and promote needs
PROMOTE (or, for INCONCLUSIVE, a person's approval)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from canary.judge import PROMOTE, ROLLBACK, Brief
from canary.rollout.core.record import RunStatus, Verdict
from canary.rollout.core.step import RolloutError

if TYPE_CHECKING:
    from canary.rollout.core.rollout import RolloutRun


def failure_verdict(rollout: RolloutRun, step_name: str, error: object, infrastructure: bool = False) -> Verdict:
    """A step after the first change failed: the verdict is ROLLBACK, with that failure as its reason (the engine
    and the Airflow judge task both decide so); `infrastructure`: the deployer could not reach a node."""
    verdict = Verdict.failure(step_name, error, infrastructure)
    rollout.state.update(verdict=verdict, status=RunStatus.judged(verdict.verdict))
    rollout.audit.record(step_name, "verdict", verdict=verdict.verdict, reason=verdict.reason, engine=None)
    return verdict


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
    rollout.audit.record(rollout.step, "verdict", verdict=result.verdict, reason=result.reason, engine=result.engine)
    return result.to_dict()
