"""The broker rollout: canary brokers get the change (a version, a config), the probe compares the lanes, the gate
promotes the change to every broker and controller (finalizing feature levels) or rolls it back.

    from canary.rollout.broker import BROKER
    from canary.rollout.core import run_all
    rollout = BROKER.open("rollout.yaml")
    run_all(BROKER, rollout)          # or one step at a time: BROKER.step("preflight")(rollout), …

Modules, one job each: rollout (the run), desired (each broker's desired state per phase), rolling (the guarded
rolling restart), probes, preflight, deploy (deploy canary, learner warm-up, lead), window, verdict, promote
(promote and rollback), verify, kind (the steps in order), cli (`kafka-canary rollout`).
"""

from canary.rollout.broker.kind import BROKER
from canary.rollout.broker.rollout import PROBE_TOPIC, Rollout

__all__ = ["BROKER", "PROBE_TOPIC", "Rollout"]
