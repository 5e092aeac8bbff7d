"""The whole rollout: the steps in order, resumable. A step already done in this run is not repeated; the
verdict decides promote or rollback; a failure after the first change rolls back, whatever raised it (a refused
step or a bug in the judge alike); a failure during promote stops and says how to go on, since features may
already be finalized."""

from __future__ import annotations

from canary.judge import INCONCLUSIVE, PROMOTE, ROLLBACK
from canary.rollout import steps
from canary.rollout.report import write_report
from canary.rollout.steps import Rollout

EXIT = {"PROMOTE": 0, "ROLLBACK": 1, "INCONCLUSIVE": 3}


def run_rollout(r: Rollout, approve: bool = False, on_inconclusive: str = "rollback") -> dict:
    """Runs every step still to do. `on_inconclusive`: "rollback" (the safe default) or "stop" (leave the canary
    in place for a person; the result says so and `promote --approve` or `rollback` continues).
    Returns {"outcome": PROMOTE|ROLLBACK|INCONCLUSIVE, "status", "reason", "report"}."""
    state = r.state
    if state.status.startswith("verified"):
        return _result(r, "the rollout had already finished")
    try:
        for name, step in (("preflight", steps.preflight), ("deploy-canary", steps.deploy_canary),
                           ("warm-up", steps.warm_up), ("lead", steps.lead),
                           ("probe-window", steps.probe_window), ("judge", steps.judge_window)):
            if not state.step_done(name) and not (name == "judge" and (state.data.get("window") or {})
                                                  .get("stopped_early")):
                try:
                    step(r)
                except Exception as exc:  # a refusal or a bug alike: once something changed, the way back is safe
                    if name == "preflight" or not state.before:
                        raise  # nothing was changed
                    r.say("%s failed (%s); rolling back", name, steps.describe(exc))
                    steps.failure_verdict(r, name, steps.describe(exc))
                    break
        verdict = state.data["verdict"]["verdict"]
        if not state.status.startswith(("promoted", "rolled_back")):
            if verdict == PROMOTE or (verdict == INCONCLUSIVE and approve):
                steps.promote(r, approve=approve)
            elif verdict == INCONCLUSIVE and on_inconclusive == "stop":
                return _result(r, "a person must decide: `kafka-canary rollout promote --approve` or "
                                  "`kafka-canary rollout rollback`, then `verify`")
            else:
                steps.rollback(r)
        steps.verify(r)
        return _result(r, "")
    finally:
        write_report(state, r.audit)


def _result(r: Rollout, note: str) -> dict:
    verdict = r.state.data.get("verdict") or {}
    status = r.state.status
    outcome = PROMOTE if "promoted" in status else ROLLBACK if "rolled_back" in status else INCONCLUSIVE
    return {"outcome": outcome, "status": status, "verdict": verdict.get("verdict"), "reason": verdict.get("reason"),
            "note": note, "run_dir": str(r.run_dir), "report": str(r.run_dir / "report.html")}
