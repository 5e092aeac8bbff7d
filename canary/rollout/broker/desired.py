"""What each broker should look like in each phase of a broker rollout: canary (the change with the canary
marker), promoted (the change), baseline (as before the rollout); a control broker is restarted as baseline."""

from __future__ import annotations

from canary import lanes
from canary.rollout.broker.record import BrokerNode
from canary.rollout.broker.rollout import Rollout
from canary.rollout.deployers.base import BrokerInfo


def target_version(run: Rollout, before: BrokerNode) -> str:
    return run.spec.change.version or before.version


def target_config(run: Rollout, before: BrokerNode) -> dict[str, str]:
    config = dict(before.config)
    for key, value in run.spec.change.config.items():
        if value is None:
            config.pop(key, None)
        else:
            config[key] = value
    return config


def desired_state(run: Rollout, broker_id: int, phase: str) -> dict:
    """What broker `broker_id` should look like in `phase`: canary, promoted, baseline (= before) or control (the
    same)."""
    before = run.snapshot.broker(broker_id)
    if phase in ("baseline", "control"):
        return {"version": before.version, "config": dict(before.config), "rack": before.rack,
                "client_delay_ms": 0.0}
    canary = phase == "canary"
    rack = lanes.canary_rack(before.rack) if canary else lanes.real_rack(before.rack)
    return {"version": target_version(run, before), "config": target_config(run, before), "rack": rack,
            "client_delay_ms": run.spec.fault.client_delay_ms if phase == run.spec.fault.on else 0.0}


def is_as_desired(b: BrokerInfo, want: dict) -> bool:
    return (b.version == want["version"] and b.config == want["config"] and (b.rack or None) == (want["rack"] or None)
            and float(b.client_delay_ms) == float(want["client_delay_ms"]))


def not_back(run: Rollout) -> list[str]:
    """Each node that is not as the pre-rollout snapshot has it, as the deployer describes it now (stopped, or on
    another version, config, rack or delay): what a failed rollback left behind. Config values are not shown (one
    may be a secret), only the keys that differ."""
    snapshot = run.snapshot
    now = {b.broker_id: b for b in run.deployer.brokers()}
    left = []
    for broker_id in sorted(int(key) for key in snapshot.brokers):
        b = now.get(broker_id)
        want = desired_state(run, broker_id, "baseline")
        if b is None or not b.running:
            left.append(f"broker {broker_id} is {'gone' if b is None else 'stopped'}")
        elif not is_as_desired(b, want):
            left.append(f"broker {broker_id} differs from before: {', '.join(_differences(b, want))}")
    controllers = {c.node_id: c for c in run.deployer.controllers()}
    for node_id, before in sorted((int(k), v) for k, v in snapshot.controllers.items()):
        c = controllers.get(node_id)
        if c is None or not c.running:
            left.append(f"controller {node_id} is {'gone' if c is None else 'stopped'}")
        elif c.version != before.version:
            left.append(f"controller {node_id} runs {c.version} (before {before.version})")
    return left


def _differences(b: BrokerInfo, want: dict) -> list[str]:
    differs = []
    if b.version != want["version"]:
        differs.append(f"version {b.version} (before {want['version']})")
    keys = sorted(k for k in b.config.keys() | want["config"].keys() if b.config.get(k) != want["config"].get(k))
    if keys:
        differs.append(f"config {', '.join(keys)}")
    if (b.rack or None) != (want["rack"] or None):
        differs.append(f"rack {b.rack or '-'} (before {want['rack'] or '-'})")
    if float(b.client_delay_ms) != float(want["client_delay_ms"]):
        differs.append(f"a client delay of {b.client_delay_ms:g} ms")
    return differs
