"""The look between two waves of a promotion: the probe, its lanes the brokers promoted so far (canary) against those
not promoted yet (baseline), for the judge's warm-up and then `promote.look`, judged as the window's interim looks
are, on the run's judge without the window's control brokers (the promoted brokers are the ones compared now). Only
a regression an interim look would stop the window for stops the promotion: the change was judged at rest in the
window already; a look that sees too little to say more lets the promotion go on.

A look has a control of its own when the run has control brokers (canary.rollout.broker.control): the brokers a
wave just promoted have been back for seconds, and against brokers that have run for hours they look worse for the
restart alone (a resumed look rolled a harmless promotion back on e2e p99 463 vs 241 ms, docs/bench.md). So the first
running broker of the waves to come is restarted unchanged just before the look, drained first like a batch, and the
look compares the promoted brokers with it: the probe sends to their partitions and its, and the judge's broker
metrics put the promoted brokers against it. It costs one restart per look; a run without control brokers
(`canary.control: none`) looks without one."""

from __future__ import annotations

from dataclasses import replace

from canary.judge import ROLLBACK
from canary.rollout.broker.batches import Batch, BatchPlan
from canary.rollout.broker.metrics import broker_metrics_source
from canary.rollout.broker.probes import before_observations, observations_path, probe_config
from canary.rollout.broker.rolling import roll_batches
from canary.rollout.broker.rollout import Rollout
from canary.rollout.broker.waves import Wave
from canary.rollout.broker.window import interim_look
from canary.rollout.core import Look
from canary.rollout.core.audit import AuditAction
from canary.rollout.window import watch_window


def look_control(run: Rollout, later: list[Wave]) -> int | None:
    """The look's control broker: with control brokers in the run, the first running broker of the `later` waves;
    None without them, or when no broker is left to restart."""
    if not run.control_ids():
        return None
    running = {b.broker_id for b in run.deployer.brokers() if b.running}
    return next((b for w in later for b in w.brokers if b in running), None)


def restart_look_control(run: Rollout, control: int) -> list[dict]:
    """Restarts the look's control broker unchanged, as a batch of one: guarded, drained first, back in every ISR
    with its leadership after. Safe to repeat (a resumed look restarts it again, as fresh as the wave it is put
    against)."""
    rack = next((b.rack for b in run.deployer.brokers() if b.broker_id == control), None)
    return roll_batches(run, BatchPlan([Batch((control,), rack)], 1, run.spec.promote.headroom), "control")


def wave_look(run: Rollout, wave: int, promoted: list[int], control: int | None = None) -> Look:
    """The look after wave `wave`, its canary lane the `promoted` brokers, its baseline lane `control` (restarted
    just before) or, without one, every broker not promoted yet. Returns what stopped it (ROLLBACK), or its last
    interim look."""
    name = f"look-{wave}"
    config = run.spec.judge.settings()
    leaders: tuple[int, ...] = ()
    if control is not None:
        config = config.changed(control_brokers=[control])
        leaders = tuple(sorted({*promoted, control}))
    cfg = replace(probe_config(run, name, leaders=leaders), canary_brokers=tuple(promoted))
    observations, before = observations_path(run, name), before_observations(run)
    # `promote.look` is the time judged: the judge leaves out the first warmup_s of a probe (its clients finding the
    # leaders the elections just moved, the promoted brokers' first seconds), so the probe runs that much longer.
    seconds = config.warmup_s + run.spec.promote.look
    probe = run.open_probe(cfg, broker_metrics_source(run))
    probe.start()
    run.audit.record(run.step, AuditAction.WAVE_LOOK_STARTED, wave=wave, promoted=promoted, control=control,
                     seconds=seconds)
    try:
        looks, stopped = watch_window(run, seconds, min(run.spec.probe.interim_interval, seconds / 2),
                                      lambda: interim_look(observations, config, before), lambda at_s, due: None)
        last = stopped or interim_look(observations, config, before).model_copy(update={"at_s": seconds})
    finally:
        probe.stop()
    run.audit.record(run.step, AuditAction.WAVE_LOOK, wave=wave, promoted=promoted, control=control,
                     looks=len(looks) + (stopped is None),
                     **last.model_dump(mode="json", include={"verdict", "reason", "failed", "observations"}))
    run.say("look after wave %d (promoted %s against %s): %s", wave, promoted,
            "the rest" if control is None else f"control broker {control}",
            "regression" if last.verdict == ROLLBACK else "no regression")
    return last
