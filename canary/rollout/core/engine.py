"""The whole rollout of any kind, resumable: a step already done in this run is not repeated; the verdict decides
promote or rollback; a failure after the first change rolls back, whatever raised it (a refused step or a bug in
the judge alike); a failure during promote stops and says how to go on (features may already be finalized)."""

from __future__ import annotations

import contextlib

from canary.errors import CanaryError
from canary.judge import INCONCLUSIVE, PROMOTE
from canary.kafka.wait import describe
from canary.rollout.core.kind import RolloutKind
from canary.rollout.core.report import write_report
from canary.rollout.core.rollout import RolloutRun
from canary.rollout.core.verdict import failure_verdict


def run_all(kind: RolloutKind, rollout: RolloutRun, approve: bool = False, on_inconclusive: str = "rollback",
            decided: str | None = None) -> dict:
    """Runs every step still to do. `on_inconclusive`: "rollback" (the safe default) or "stop" (leave the canary in
    place for a person; the result says so, and `promote --approve` or `rollback` continues). `decided`: "promote"
    or "rollback" when a person chose before the verdict, for a kind whose canary cannot wait for a later command
    (the migration canary's instances live in this process): the verdict is still reached and recorded, then the
    choice is carried out (the kind's promote step says whether it may).
    Returns {"outcome": PROMOTE|ROLLBACK|INCONCLUSIVE, "status", "verdict", "reason", "note", "run_dir", "report"}."""
    state = rollout.state
    if state.status.verified:
        return result(rollout, "the rollout had already finished")
    try:
        _until_verdict(kind, rollout)
        if not state.status.finished:
            verdict = state.data["verdict"]["verdict"]
            if decided == "promote" or (decided is None and (
                    verdict == PROMOTE or (verdict == INCONCLUSIVE and approve))):
                kind.promote(rollout, approve=approve)
            elif decided is None and verdict == INCONCLUSIVE and on_inconclusive == "stop":
                return result(rollout, f"a person must decide: `kafka-canary {kind.command} promote --approve` or "
                                       f"`kafka-canary {kind.command} rollback`, then `verify`")
            else:
                kind.rollback(rollout)
        kind.verify(rollout)
        return result(rollout, "")
    finally:
        with contextlib.suppress(CanaryError, OSError):
            write_report(state, rollout.audit)


def _until_verdict(kind: RolloutKind, rollout: RolloutRun) -> None:
    state = rollout.state
    for step in kind.steps:
        if state.step_done(step.name) or state.status.finished:
            continue
        try:
            step(rollout)
        except Exception as exc:  # a refusal or a bug alike: once something changed, the way back is safe
            if not step.after_change or not state.before:
                raise  # nothing was changed
            rollout.say("%s failed (%s); rolling back", step.name, describe(exc))
            failure_verdict(rollout, step.name, describe(exc))
            return
        if (state.data.get("window") or {}).get("stopped_early"):
            return  # the window already decided (fail fast): nothing is left to analyse


def result(rollout: RolloutRun, note: str) -> dict:
    verdict = rollout.state.data.get("verdict") or {}
    status = rollout.state.status
    return {"outcome": status.outcome or INCONCLUSIVE, "status": status, "verdict": verdict.get("verdict"),
            "reason": verdict.get("reason"), "note": note, "run_dir": str(rollout.run_dir),
            "report": str(rollout.run_dir / "report.html")}
