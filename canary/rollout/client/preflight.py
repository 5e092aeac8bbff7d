"""Preflight of a client rollout: everything checked before any change, the lock taken, the state recorded."""

from __future__ import annotations

import time

from canary.rollout.client import lane_plan
from canary.rollout.client.fleet import converge, fleet_differences
from canary.rollout.client.lane import canary_brokers, canary_partitions_now, replicas
from canary.rollout.client.record import ClientSnapshot, InstanceSnapshot
from canary.rollout.client.rollout import ClientRollout, fleet
from canary.rollout.core import RolloutError, RunStatus, SpecMismatch
from canary.rollout.core.audit import AuditAction


def preflight(run: ClientRollout) -> dict:
    """Checks everything before any change: brokers running and the cluster healthy, the service topic exists with
    no reassignment in flight and no canary partition yet, a canary broker hosts replicas of it (the lane plan),
    every baseline instance runs on the `from` version; takes the lock; records the pre-rollout state."""
    spec = run.spec
    brokers = run.deployer.brokers()
    down = [b.broker_id for b in brokers if not b.running]
    if down:
        raise RolloutError(f"brokers {down} are not running; start them before a rollout")
    seen = run.admin.health([b.broker_id for b in brokers], [c.node_id for c in run.deployer.controllers()])
    if not seen.healthy:
        raise RolloutError(f"the cluster is not healthy: {seen.reason()}; fix it before a rollout")
    state = run.observe()
    if not state.exists:
        raise SpecMismatch(f"the service topic {run.topic} does not exist; create it (or fix service.topic)")
    if state.reassigning:
        raise RolloutError(f"partitions {sorted(state.reassigning)} of {run.topic} are being reassigned; wait for it")
    canaries = canary_brokers(state)
    if run.state.before is None:
        existing = lane_plan.canary_partitions({p: s.leader for p, s in state.partitions.items()}, canaries)
        if existing:
            raise RolloutError(f"{run.topic} already has canary partitions {existing} (led by canary broker(s) "
                               f"{canaries}); canary partitions of a service topic exist only during a client "
                               f"rollout: move their leadership to baseline brokers (reorder the replicas so a "
                               f"baseline broker is first, then a preferred leader election)")
        plan = lane_plan.plan_open(replicas(state), canaries, spec.lane.partitions, run.topic)
    else:
        plan = run.snapshot.lane_plan()
    baseline = fleet(spec, spec.change.from_)
    cannot = [p for i in fleet(spec, spec.change.to, "canary") if (p := run.services.program_problem(i))]
    if cannot:  # a mistake in the spec, found before any change
        raise SpecMismatch(f"service.command: {'; '.join(dict.fromkeys(cannot))}; fix service.command or service.cwd")
    wrong = fleet_differences(run, baseline)
    if wrong and run.state.before is None:
        raise RolloutError(f"the baseline fleet is not running on {spec.change.from_}: {'; '.join(wrong)}; start it "
                           f"with `kafka-canary client-rollout baseline --spec FILE`")
    taken = run.lock.acquire(run.run_id, len(brokers))
    run.audit.record("preflight", AuditAction.LOCK_TAKEN if taken else AuditAction.LOCK_ALREADY_HELD)
    if run.state.before is None:
        before = ClientSnapshot(taken_ms=int(time.time() * 1000), topic=run.topic, canary_brokers=canaries,
                                replicas={str(p): v for p, v in replicas(state).items()},
                                lane={str(p): v for p, v in plan.items()},
                                instances=[InstanceSnapshot.model_validate(s.to_dict())
                                           for s in run.services.instances()])
        run.state.update(before=before, canary_brokers=canaries, status=RunStatus.PREFLIGHT)
        run.audit.record("preflight", AuditAction.SNAPSHOT, before=before.model_dump(mode="json"))
    return {"canary_brokers": canaries, "lane_plan": {str(p): v for p, v in plan.items()},
            "baseline": [i.name for i in baseline]}


def deploy_canary(run: ClientRollout) -> dict:
    """Starts the canary instances on the target version: consumers first, then producers (the lane is open, so
    their records go to canary partitions only)."""
    if not canary_partitions_now(run):
        raise RolloutError(f"{run.topic} has no canary partition: the lane is not open; run open-lane first")
    canary = fleet(run.spec, run.spec.change.to, "canary")
    started = converge(run, [i for i in canary if i.role == "consumer"])
    started += converge(run, [i for i in canary if i.role == "producer"])
    run.state.update(status=RunStatus.CANARY_DEPLOYED)
    return {"started": started, "canary": [i.name for i in canary]}
