"""The probe window of a broker rollout, with interim looks (fail fast) and a watch on the cluster."""

from __future__ import annotations

import time
from pathlib import Path

from canary.analysis.inline import aggregate, calibration
from canary.judge import brief, e_values, judge
from canary.probe.load import Load, LoadConfig
from canary.probe.runner import Probe
from canary.probe.user_reads import UserReads, UserReadsConfig
from canary.rollout.broker.metrics import broker_metrics_source
from canary.rollout.broker.probes import before_observations, observations_path, probe_config, window_leaders
from canary.rollout.broker.record import BrokerWindow, LaneCounts, TrafficJudged
from canary.rollout.broker.rollout import Rollout
from canary.rollout.broker.traffic import window_traffic
from canary.rollout.core import Look
from canary.rollout.core.audit import AuditAction
from canary.rollout.window import fail_fast_verdict, watch_window


def interim_look(observations: Path, config, before: Path | None) -> Look:
    """The judge's interim look at the window's observations so far (`before`: the preflight's, see
    canary.judge.calibration)."""
    agg, usable = aggregate(observations, config)
    verdict = judge(agg, config, final=False, before=calibration(before))
    return Look(**brief(verdict).model_dump(), observations=usable, evidence=e_values(verdict))


def disturbances(run: Rollout, full: bool) -> list[str]:
    """What is wrong with the cluster right now beyond the canary being compared: brokers down (the deployer), and
    with `full` also brokers not registered and offline partitions (the cluster's metadata)."""
    brokers = run.deployer.brokers()
    problems = [f"broker {b.broker_id} down" for b in brokers if not b.running]
    if full:
        seen = run.admin.health([b.broker_id for b in brokers])
        if seen.error:
            problems.append(seen.error)
        missing = [b for b in seen.missing_brokers if f"broker {b} down" not in problems]
        if missing:
            problems.append(f"brokers {missing} not registered")
        if seen.offline_partitions:
            problems.append(f"{len(seen.offline_partitions)} offline partition(s)")
    return problems


def load_rate(run: Rollout) -> float:
    """The window's load, records/s per partition: the spec's, or with `auto` what preflight measured
    (canary.probe.load_sizing), before any change."""
    rate = run.spec.load.rate
    if isinstance(rate, str):  # auto
        return float((run.state.record.load_sizing or {}).get("rate", 0.0))
    return rate


def probe_window(run: Rollout) -> dict:
    """Probe traffic for the window with interim looks every interval; a critical regression at a look stops
    the window early (fail fast) and decides ROLLBACK at once. The cluster is watched meanwhile (brokers down every
    second, registration and offline partitions at each look): a window in which it was disturbed cannot promote,
    whatever the lanes' comparison says (see judge_window)."""
    spec = run.spec
    config = run.judge_config()
    attempt = run.state.record.steps["probe-window"].attempts
    cfg = probe_config(run, f"window-{attempt}", leaders=window_leaders(run))
    observations = observations_path(run, f"window-{attempt}")
    before = before_observations(run)
    probe = run.open_probe(cfg, broker_metrics_source(run))  # the brokers' own metrics beside the messages
    start_ms = int(time.time() * 1000)
    probe.start()
    run.audit.record(run.step, AuditAction.PROBE_STARTED, probe_run_id=cfg.run_id, window_s=spec.probe.window)
    rate = load_rate(run)
    load, reads = _start_beside(run, probe, cfg.run_id, rate)
    watch = DisturbanceWatch(run)
    try:
        interim, stopped_early = watch_window(run, spec.probe.window, spec.probe.interim_interval,
                                              lambda: interim_look(observations, config, before), watch.tick)
    finally:
        loaded = load.stop() if load is not None else None
        read_back = reads.stop() if reads is not None else None
        summary = probe.stop()
    window = BrokerWindow(attempt=attempt, probe_run_id=cfg.run_id, start_ms=start_ms, end_ms=int(time.time() * 1000),
                          observations=run.relative(observations), stopped_early=stopped_early, interim=interim,
                          disturbed=watch.disturbed[:20],
                          probe={lane: LaneCounts(**{k: t[k] for k in ("sent", "acked", "lost", "produce_errors")})
                                 for lane, t in summary.lanes.items()},
                          broker_readings=summary.broker_readings, load=loaded,
                          traffic=TrafficJudged.model_validate(window_traffic(run, observations, rate) | (
                              {"catch_up_reads": read_back} if read_back else {})))
    run.say("traffic in the window: %s", window.traffic.reason if window.traffic else None)
    run.state.update(window=window, verdict=None)
    if stopped_early:
        fail_fast_verdict(run, stopped_early, probe_run_id=cfg.run_id, probe=window.probe_counts(),
                          traffic=window.traffic_dict())
    return window.model_dump(mode="json", include={"probe_run_id", "start_ms", "end_ms", "probe", "disturbed",
                                                  "broker_readings", "load", "traffic"}) | {
        "load": window.load, "stopped_early": stopped_early is not None, "interim_looks": len(interim)}


def _start_beside(run: Rollout, probe: Probe, probe_run_id: str, rate: float) -> tuple[Load | None, UserReads | None]:
    """Starts the window's load (at `rate` records/s per partition; none at 0) and the catch-up reads beside the
    started `probe`, their records into its sink. A failure stops what started, the probe too (the step is retried:
    nothing is left running behind it)."""
    spec = run.spec
    load, reads = None, None
    try:
        if rate:
            load = Load(LoadConfig(run.bootstrap_servers, rate, spec.load.record_size, dict(spec.client),
                                   interval=spec.broker_metrics.interval, run_id=probe_run_id), emit=probe.sink.emit)
            load.start()
            run.audit.record(run.step, AuditAction.LOAD_STARTED, rate_per_partition=rate,
                             record_size=spec.load.record_size)
        if spec.traffic.catch_up_bytes:
            reads = UserReads(UserReadsConfig(run.bootstrap_servers, spec.traffic.catch_up_bytes,
                                              spec.traffic.catch_up_partitions, spec.traffic.catch_up_interval,
                                              probe_run_id, dict(spec.client)), emit=probe.sink.emit)
            reads.start()
    except BaseException:
        for started in (reads, load, probe):
            if started is not None:
                started.stop()
        raise
    return load, reads


class DisturbanceWatch:
    """The cluster watched through the window: each problem (disturbances) once, when first seen, said and
    audited; `disturbed` lists them with the second they were seen at."""

    def __init__(self, run: Rollout):
        self.run = run
        self.disturbed: list[str] = []
        self.seen: set[str] = set()

    def tick(self, at_s: float, look_due: bool) -> None:
        """Brokers down every tick; registration and offline partitions when a look is due."""
        try:
            now = disturbances(self.run, look_due)
        except Exception as exc:  # the cluster not answering is a disturbance too
            now = [f"the cluster did not answer ({exc})"]
        new = [p for p in now if p not in self.seen]
        if new:
            self.seen.update(new)
            self.disturbed.extend(f"at {at_s:.0f}s: {p}" for p in new)
            self.run.say("the cluster is disturbed during the window: %s", "; ".join(new))
            self.run.audit.record(self.run.step, AuditAction.CLUSTER_DISTURBED, at_s=round(at_s, 1), problems=new)

