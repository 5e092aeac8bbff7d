"""The probe in each phase of a broker rollout: short green probes (preflight, verify, finalize) and the
probe that watches every roll for lost acknowledged messages. Each also reads the brokers' own metrics into its
observations file, so every phase of the run keeps them (the window's are judged)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from canary.probe.config import ProbeConfig
from canary.probe.view import ProbeSummary
from canary.rollout.broker.metrics import broker_metrics_source
from canary.rollout.broker.rollout import Rollout
from canary.rollout.core import RolloutError
from canary.rollout.core.audit import AuditAction


def observations_path(run: Rollout, name: str) -> Path:
    """Where the probe of phase `name` writes its observations: the run directory."""
    return run.run_dir / f"observations-{name}.jsonl"


def before_observations(run: Rollout) -> Path | None:
    """The last green preflight probe's observations: the brokers before the change, which the window's latencies
    are calibrated by (canary.judge.calibration); None before preflight passed or when the file is gone."""
    preflight = run.state.record.step("preflight")
    result = (preflight.result if preflight else None) or {}
    if not run.spec.probe.calibration:
        return None
    probe_run_id = (result.get("probe") or {}).get("probe_run_id")
    if not probe_run_id:
        return None
    path = probe_observations(run, probe_run_id)
    return path if path.is_file() else None


def probe_observations(run: Rollout, probe_run_id: str) -> Path:
    """The observations file of the probe this rollout ran as `probe_run_id` (probe_config names it)."""
    return observations_path(run, probe_run_id.removeprefix(f"{run.run_id}-"))


def probe_config(run: Rollout, name: str, seconds: float | None = None, reconcile: bool = False,
                 leaders: tuple[int, ...] = ()) -> ProbeConfig:
    """The probe of one phase of the rollout, its observations in the run directory, of the partitions `leaders`
    lead (empty: all). Only the preflight probe reconciles the canary topic: during the rollout the rollout alone
    changes the cluster."""
    observations = observations_path(run, name)
    observations.unlink(missing_ok=True)
    return ProbeConfig(bootstrap_servers=run.bootstrap_servers, rate=run.spec.probe.rate, duration=seconds,
                       run_id=f"{run.run_id}-{name}", producer_id=f"rollout-{run.run_id}", client=dict(run.spec.client),
                       observations_file=str(observations), rtt_sla=15.0, message_timeout=10.0, reconcile=reconcile,
                       broker_metrics_interval=run.spec.broker_metrics.interval, leaders=leaders)


def window_leaders(run: Rollout) -> tuple[int, ...]:
    """Whose partitions the window's probe sends to. With control brokers, the canary's and theirs alone: the probe's
    baseline lane is then the control, as freshly restarted as the canary (a broker restarted minutes ago is slower
    than one that has run for hours, more so with the default JIT: docs/bench.md, "With a control broker"), and the
    untouched brokers are judged against themselves before the change. Without, every partition (empty)."""
    controls = run.control_ids()
    return tuple(sorted({*run.canary_ids(), *controls})) if controls else ()


def run_probe(run: Rollout, name: str, seconds: float, reconcile: bool = False) -> ProbeSummary:
    run.say("probe %s for %.0fs at %g msg/s per partition", name, seconds, run.spec.probe.rate)
    return run.open_probe(probe_config(run, name, seconds, reconcile), broker_metrics_source(run)).run()


@contextlib.contextmanager
def watched(run: Rollout, name: str, result: dict) -> Iterator[None]:
    """Probe traffic for as long as a step rolls brokers: acknowledged messages lost during the rolls land in
    `result["probe"]` (the goal is none)."""
    probe = run.open_probe(probe_config(run, name), broker_metrics_source(run))
    probe.start()
    try:
        yield
    finally:
        summary = probe.stop()
        result["probe"] = {"probe_run_id": summary.run_id, **{
            k: sum(t[k] for t in summary.lanes.values()) for k in ("sent", "acked", "lost", "produce_errors")}}
        run.audit.record(run.step, AuditAction.PROBE_DURING_ROLLS, **result["probe"])


def probe_problems(summary: ProbeSummary) -> list[str]:
    """Why a probe run is not green: nothing acknowledged, any acknowledged message lost, errors above 1 %."""
    problems = []
    if not summary.acked:
        problems.append("no message was acknowledged")
    for lane, t in summary.lanes.items():
        if t["lost"]:
            problems.append(f"{t['lost']} acknowledged message(s) lost in lane {lane}")
        if t["sent"] and t["produce_errors"] / t["sent"] > 0.01:
            problems.append(f"{t['produce_errors']} of {t['sent']} produces failed in lane {lane}")
    return problems


def green_probe(run: Rollout, name: str, tries: int = 2, reconcile: bool = False, seconds: float | None = None
                ) -> dict:
    """A short probe (`seconds`, default the spec's preflight probe) that must be green; one failed try is repeated,
    so a passing hiccup (a busy machine, a topic just created) does not stop a rollout, while a real problem fails
    both tries."""
    for attempt in range(1, tries + 1):
        summary = run_probe(run, f"{name}-{attempt}", seconds or run.spec.probe.preflight, reconcile)
        problems = probe_problems(summary)
        result = {"probe_run_id": summary.run_id, "acked": summary.acked,
                  "lost": sum(t["lost"] for t in summary.lanes.values()), "problems": problems}
        run.audit.record(run.step, AuditAction.PROBE, **result)
        if not problems:
            return result
    raise RolloutError(f"the {name} probe is not green (tried {tries} times): {'; '.join(problems)}")
