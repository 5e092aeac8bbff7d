"""The broker rollout: canary brokers get the change (a version, a config), the probe compares the lanes, the gate
promotes the change to every broker and controller or rolls it back; finalize, a step of its own after the bake,
raises the feature levels.

    from canary.rollout.broker import BROKER
    from canary.rollout.core import run_all
    rollout = BROKER.open("rollout.yaml")
    run_all(BROKER, rollout)          # or one step at a time: BROKER.step("preflight")(rollout), …

Modules, one job each: spec (the spec model), record (what run.json keeps: snapshot, window, promotion), rollout
(the run and its ports), desired (each broker's desired state per phase), rolling (the guarded rolling restart),
batches, drain, recovery, restarted, control (the control brokers), probes, metrics (the brokers' own metrics
source), config_check, preflight, traffic (the canary's share of client traffic), deploy (deploy canary, learner
warm-up, lead), window, verdict, overrule (the one rule that turns the judge's word into another), waves and
wave_look, promote, finalize, rollback, verify, report (its sections of the run report), kind (the steps in
order), cli (`kafka-canary rollout`).
"""

from canary.rollout.broker.kind import BROKER
from canary.rollout.broker.rollout import PROBE_TOPIC, Rollout

__all__ = ["BROKER", "PROBE_TOPIC", "Rollout"]
