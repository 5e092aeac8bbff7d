"""What each broker should look like in each phase of a broker rollout: canary (the change with the canary
marker), promoted (the change), baseline (as before the rollout)."""

from __future__ import annotations

from canary import lanes
from canary.rollout.broker.rollout import Rollout
from canary.rollout.deployer import BrokerInfo


def target_version(run: Rollout, before: dict) -> str:
    return run.spec.change.version or before["version"]


def target_config(run: Rollout, before: dict) -> dict[str, str]:
    config = dict(before["config"])
    for key, value in run.spec.change.config.items():
        if value is None:
            config.pop(key, None)
        else:
            config[key] = value
    return config


def desired_state(run: Rollout, broker_id: int, phase: str) -> dict:
    """What broker `broker_id` should look like in `phase`: canary, promoted or baseline (= before)."""
    before = run.state.snapshot["brokers"][str(broker_id)]
    if phase == "baseline":
        return {"version": before["version"], "config": before["config"], "rack": before["rack"],
                "client_delay_ms": 0.0}
    canary = phase == "canary"
    rack = lanes.canary_rack(before["rack"]) if canary else lanes.real_rack(before["rack"])
    return {"version": target_version(run, before), "config": target_config(run, before), "rack": rack,
            "client_delay_ms": run.spec.fault.client_delay_ms if canary else 0.0}


def is_as_desired(b: BrokerInfo, want: dict) -> bool:
    return (b.version == want["version"] and b.config == want["config"] and (b.rack or None) == (want["rack"] or None)
            and float(b.client_delay_ms) == float(want["client_delay_ms"]))
