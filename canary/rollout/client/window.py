"""The window of a client rollout and its verdict: traffic through both lanes, interim looks (fail fast), a
watch on the canary instances, then the final analysis."""

from __future__ import annotations

import time

from canary.analysis import inline
from canary.judge import ROLLBACK, Brief, brief, e_values, judge
from canary.rollout import judging
from canary.rollout.client.rollout import ClientRollout, fleet
from canary.rollout.core import Look, RolloutError, Window
from canary.rollout.core.audit import AuditAction
from canary.rollout.core.observations import fetch_observations
from canary.rollout.core.verdict import record_verdict
from canary.rollout.window import fail_fast_verdict, watch_window


def look(run: ClientRollout, start_ms: int, end_ms: int, name: str, final: bool) -> Look:
    """The judge's look at the service's observations sent in [start_ms, end_ms)."""
    config = run.spec.judge_settings()
    path = run.run_dir / f"observations-{name}.jsonl"
    count = fetch_observations(run.bootstrap_servers, run.spec.client, run.spec.service.observations_run_id, start_ms,
                               end_ms, path)
    agg, usable = inline.aggregate(path, config)
    verdict = judge(agg, config, final=final)
    return Look(**brief(verdict).model_dump(), observations=count, usable=usable, evidence=e_values(verdict))


def window(run: ClientRollout) -> dict:
    """Lets traffic flow through both lanes for the window, with interim looks (fail fast on a critical
    regression) and a watch on the canary instances (one that exits decides ROLLBACK at once)."""
    spec = run.spec
    attempt = run.state.record.steps["window"].attempts
    canary = fleet(spec, spec.change.to, "canary")
    start_ms = int(time.time() * 1000)
    run.audit.record(run.step, AuditAction.WINDOW_STARTED, window_s=spec.window.duration)

    def tick(at_s: float, look_due: bool) -> Brief | None:
        gone = [i.name for i in canary if not (s := run.services.status(i.name)) or not s.running]
        return Brief(verdict=ROLLBACK, reason=f"canary instance(s) {gone} exited during the window (see their logs "
                                              f"in {run.services.directory})") if gone else None

    def interim_look() -> Look:
        return look(run, start_ms, int(time.time() * 1000), f"interim-{attempt}", final=False)

    interim, stopped_early = watch_window(run, spec.window.duration, spec.window.interim_interval, interim_look, tick)
    window = Window(attempt=attempt, start_ms=start_ms, end_ms=int(time.time() * 1000), stopped_early=stopped_early,
                    interim=interim)
    run.state.update(window=window, verdict=None)
    if stopped_early:
        fail_fast_verdict(run, stopped_early)
    return {"start_ms": start_ms, "end_ms": window.end_ms, "stopped_early": stopped_early is not None,
            "interim_looks": len(interim)}


def judge_window(run: ClientRollout) -> dict:
    """The verdict of the window: the fail-fast one if it stopped early, else the analysis of the window's
    observations (the Spark job, or the judge in-process with engine: inline). A failed analysis is INCONCLUSIVE."""
    window, decided = run.state.window, run.state.verdict
    if window is None:
        raise RolloutError("no window has run yet; run the window step first")
    if window.stopped_early is not None and decided is not None:
        return decided.to_dict()
    time.sleep(3.0)  # records sent at the window's end are processed, and their observations flushed, a moment later
    config = run.spec.judge_settings()
    observations = run.run_dir / f"observations-window-{window.attempt}.jsonl"
    count = fetch_observations(run.bootstrap_servers, run.spec.client, run.spec.service.observations_run_id,
                               window.start_ms, window.end_ms, observations)
    run.audit.record(run.step, AuditAction.OBSERVATIONS_READ, count=count, file=str(observations))
    request = judging.analysis_request(run, observations=observations, from_ms=window.start_ms,
                                       to_ms=window.end_ms, source_run_id=run.spec.service.observations_run_id,
                                       out=run.run_dir / f"analysis-{window.attempt}", config=config)
    verdict = judging.final_verdict(run, request, observations, config)
    return record_verdict(run, verdict.model_copy(update={"analysis": run.relative(request["out"])}),
                          observations=count)
