"""The verdict of a broker rollout's window: the fail-fast one, else the final analysis (the Spark job, or the
judge in-process); a failed analysis is INCONCLUSIVE, never PROMOTE."""

from __future__ import annotations

from canary.judge import INCONCLUSIVE, PROMOTE
from canary.rollout import judging
from canary.rollout.broker.probes import before_observations
from canary.rollout.broker.rollout import Rollout
from canary.rollout.broker.traffic import capacity_verdict
from canary.rollout.core import RolloutError
from canary.rollout.core.verdict import record_verdict
from canary.rollout.spec import judge_settings


def analysis_request(run: Rollout) -> dict:
    """What the final analysis of the last probe window reads and writes (judging.analysis_request)."""
    window = run.state.data.get("window")
    if not window:
        raise RolloutError("no probe window has run yet; run the probe-window step first")
    return judging.analysis_request(run, observations=run.local(window["observations"]), from_ms=window["start_ms"],
                                    to_ms=window["end_ms"] + 1, source_run_id=window["probe_run_id"],
                                    out=run.run_dir / f"analysis-{window['attempt']}",
                                    config=judge_settings(run.spec.judge_config), before=before_observations(run))


def judge_window(run: Rollout) -> dict:
    """The verdict of the last probe window: the fail-fast one if it stopped early, else the final analysis's
    (a verdict.json the Spark job already wrote, else the Spark job run now, or the judge in-process with
    engine: inline). A failed analysis is INCONCLUSIVE, never PROMOTE."""
    window = run.state.data.get("window") or {}
    if window.get("stopped_early"):
        return run.state.data["verdict"]
    request = analysis_request(run)
    observations = run.local(window["observations"])
    verdict = judging.final_verdict(run, request, observations, judge_settings(run.spec.judge_config))
    if verdict["verdict"] == PROMOTE and window.get("disturbed"):
        # A broker that failed in the window hurt both lanes (every acks=all write waits for its replicas) and may
        # have failed because of the canary; lanes that look alike then prove nothing. A person decides.
        shown = "; ".join(window["disturbed"][:3]) + ("; …" if len(window["disturbed"]) > 3 else "")
        verdict = verdict | {"verdict": INCONCLUSIVE, "reason": f"the cluster was disturbed during the window "
                                                                 f"({shown}), so it cannot promote; the analysis "
                                                                 f"said PROMOTE: {verdict['reason']}"}
    traffic = window.get("traffic")
    verdict = capacity_verdict(verdict, traffic, required=run.spec.capacity == "required")
    return record_verdict(run, verdict | {"analysis": run.relative(request["out"])},
                          probe_run_id=window["probe_run_id"], probe=window["probe"], traffic=traffic)
