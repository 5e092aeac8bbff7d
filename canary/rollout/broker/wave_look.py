"""The look between two waves of a promotion: the probe, its lanes the brokers promoted so far (canary) against those
not promoted yet (baseline), for the judge's warm-up and then `promote.look`, judged as the window's interim looks
are, on the run's judge without its control brokers (the promoted brokers are the ones compared now). Only a
regression an interim look would stop the window for stops the promotion: the change was judged at rest in the
window already; a look that sees too little to say more lets the promotion go on."""

from __future__ import annotations

from dataclasses import replace

from canary.judge import ROLLBACK
from canary.rollout.broker.metrics import broker_metrics_source
from canary.rollout.broker.probes import before_observations, observations_path, probe_config
from canary.rollout.broker.rollout import Rollout
from canary.rollout.broker.window import interim_look
from canary.rollout.core import Look
from canary.rollout.window import watch_window


def wave_look(run: Rollout, wave: int, promoted: list[int]) -> Look:
    """The look after wave `wave`, its canary lane the `promoted` brokers. Returns what stopped it (ROLLBACK), or its
    last interim look."""
    name = f"look-{wave}"
    config = run.spec.judge.settings()
    cfg = replace(probe_config(run, name), canary_brokers=tuple(promoted))
    observations, before = observations_path(run, name), before_observations(run)
    # `promote.look` is the time judged: the judge leaves out the first warmup_s of a probe (its clients finding the
    # leaders the elections just moved, the promoted brokers' first seconds), so the probe runs that much longer.
    seconds = config.warmup_s + run.spec.promote.look
    probe = run.open_probe(cfg, broker_metrics_source(run))
    probe.start()
    run.audit.record(run.step, "wave look started", wave=wave, promoted=promoted, seconds=seconds)
    try:
        looks, stopped = watch_window(run, seconds, min(run.spec.probe.interim_interval, seconds / 2),
                                      lambda: interim_look(observations, config, before), lambda at_s, due: None)
        last = stopped or interim_look(observations, config, before).model_copy(update={"at_s": seconds})
    finally:
        probe.stop()
    run.audit.record(run.step, "wave look", wave=wave, promoted=promoted, looks=len(looks) + (stopped is None),
                     **last.model_dump(mode="json", include={"verdict", "reason", "failed", "observations"}))
    run.say("look after wave %d (promoted %s against the rest): %s", wave, promoted,
            "regression" if last.verdict == ROLLBACK else "no regression")
    return last
