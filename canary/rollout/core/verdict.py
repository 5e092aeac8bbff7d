"""Verdict rules every kind shares: a failure after the first change is a ROLLBACK verdict, and promote needs
PROMOTE (or, for INCONCLUSIVE, a person's approval)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from canary.judge import PROMOTE, ROLLBACK
from canary.rollout.core.step import RolloutError

if TYPE_CHECKING:
    from canary.rollout.core.rollout import RolloutRun


def failure_verdict(rollout: RolloutRun, step_name: str, error: object) -> dict:
    """A step after the first change failed: the verdict is ROLLBACK, with that failure as its reason (the engine
    and the Airflow judge task both decide so)."""
    verdict = {"verdict": ROLLBACK, "reason": f"{step_name} failed: {error}", "engine": None}
    rollout.state.update(verdict=verdict, status=f"judged {ROLLBACK}")
    rollout.audit.record(step_name, "verdict", verdict=ROLLBACK, reason=verdict["reason"], engine=None)
    return verdict


def require_promotable(rollout: RolloutRun, approve: bool) -> None:
    """Raises unless the verdict is PROMOTE, or INCONCLUSIVE with a person's approval."""
    verdict = (rollout.state.data.get("verdict") or {}).get("verdict")
    if verdict == ROLLBACK or (verdict != PROMOTE and not approve):
        raise RolloutError(f"the verdict is {verdict or 'not reached yet'}; promote needs PROMOTE "
                           f"(or, for INCONCLUSIVE, a person's approval: --approve)")


def record_verdict(rollout: RolloutRun, verdict: dict, **details: object) -> dict:
    """Records the verdict of the last window in run.json (status "judged <VERDICT>") and the audit log; returns
    it with `details` (what the kind adds: the window, the analysis, …). `failed`: the metrics that failed (none when
    something else decided, e.g. a canary instance that exited)."""
    window = rollout.state.data["window"]
    result = {"verdict": verdict["verdict"], "reason": verdict["reason"], "engine": verdict.get("engine"),
              "failed": list(verdict.get("failed") or []),
              "window_ms": [window["start_ms"], window["end_ms"]], "stopped_early": bool(window["stopped_early"]),
              "interim_looks": len(window["interim"]), "analysis": verdict.get("analysis"), **details}
    rollout.state.update(verdict=result, status=f"judged {result['verdict']}")
    rollout.audit.record(rollout.step, "verdict", verdict=result["verdict"], reason=result["reason"],
                         engine=result["engine"])
    return result
