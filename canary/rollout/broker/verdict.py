"""The verdict of a broker rollout's window: the fail-fast one, else the final analysis (the Spark job, or the
judge in-process) of the run's own observations file; a failed analysis is INCONCLUSIVE, never PROMOTE; a window
whose observations the gate lost (the probe sent, the file holds none valid) is the gate's failure, rolled back and
named so, never an INCONCLUSIVE that reads like the change's."""

from __future__ import annotations

from pathlib import Path

from canary.judge.config import JudgeConfig
from canary.observations import Observation, ObservationsFileError, read_file_counted
from canary.rollout import judging
from canary.rollout.broker.overrule import overrule
from canary.rollout.broker.probes import before_observations
from canary.rollout.broker.record import BrokerWindow
from canary.rollout.broker.rollout import Rollout
from canary.rollout.core import RolloutError
from canary.rollout.core.verdict import failure_verdict, record_verdict


def last_window(run: Rollout) -> BrokerWindow:
    """The last probe window; RolloutError when none has run yet."""
    window = run.record.window
    if window is None or window.observations is None or window.probe_run_id is None:
        raise RolloutError("no probe window has run yet; run the probe-window step first")
    return window


def analysis_request(run: Rollout, config: JudgeConfig | None = None) -> dict:
    """What the final analysis of the last probe window reads and writes (judging.analysis_request); `config`: the
    run's judge config when the caller has it already."""
    window = last_window(run)
    return judging.analysis_request(run, observations=run.local(window.observations or ""), from_ms=window.start_ms,
                                    to_ms=window.end_ms + 1, source_run_id=window.probe_run_id or "",
                                    out=run.run_dir / f"analysis-{window.attempt}",
                                    config=config or run.judge_config(), before=before_observations(run))


def lost_observations(window: BrokerWindow, observations: Path) -> str | None:
    """Why the window cannot be judged at all: the probe sent messages in it, yet its observations file holds no
    valid observation. That is a failure of the gate (its probe, its files), never of the change, and the verdict
    says so; None when there is something to judge (or nothing was sent)."""
    sent = sum(c.sent for c in (window.probe or {}).values())
    if not sent:
        return None
    try:
        records, excluded = read_file_counted(observations)
    except ObservationsFileError as exc:
        records, excluded = [], {str(exc): 1}
    if any(isinstance(r, Observation) for r in records):
        return None
    why = ", ".join(f"{n} {reason}" for reason, n in sorted(excluded.items())) or "no record at all"
    return (f"the gate lost its own observations: the probe sent {sent} message(s) in the window, but its "
            f"observations file {window.observations} holds no valid observation ({why}); the change was not "
            f"judged")


def judge_window(run: Rollout) -> dict:
    """The verdict of the last probe window: the fail-fast one if it stopped early, else the final analysis's
    (a verdict.json the Spark job already wrote, else the Spark job run now, or the judge in-process with
    engine: inline). A failed analysis is INCONCLUSIVE, never PROMOTE."""
    window, decided = last_window(run), run.state.verdict
    if window.stopped_early is not None and decided is not None:
        return decided.to_dict()
    observations = run.local(window.observations or "")  # last_window refuses a window without its file
    lost = lost_observations(window, observations)
    if lost:  # the gate's own failure: rolled back, and named as what it is
        return failure_verdict(run, "judge", lost).to_dict()
    config = run.judge_config()
    request = analysis_request(run, config)
    traffic = window.traffic_dict()
    # What the rollout knows and the judge does not: a disturbed cluster, capacity not judged (overrule.Overrule).
    verdict = overrule(judging.final_verdict(run, request, observations, config), disturbed=window.disturbed,
                       traffic=traffic, capacity=run.spec.capacity)
    return record_verdict(run, verdict.model_copy(update={"analysis": run.relative(request["out"])}),
                          probe_run_id=window.probe_run_id, probe=window.probe_counts(), traffic=traffic)
