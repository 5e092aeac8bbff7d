"""Deploy canary, learner warm-up and lead: the canary brokers get the change with the canary marker, rejoin
every ISR, then lead their preferred partitions (canary partitions now exist)."""

from __future__ import annotations

from canary.rollout.broker.probes import watched
from canary.rollout.broker.rolling import roll_fleet, wait_in_isr
from canary.rollout.broker.rollout import PROBE_TOPIC, Rollout
from canary.rollout.core import RolloutError
from canary.rollout.leaders import elect_until_led


def deploy_canary(run: Rollout) -> dict:
    """Rolls each canary broker to the target with the canary marker, one at a time under the guard."""
    result: dict = {"canary_brokers": run.canary_ids()}
    with watched(run, "deploy", result):
        result["rolled"] = roll_fleet(run, run.canary_ids(), "canary", warm=False)
    run.state.update(status="canary deployed")
    return result


def warm_up(run: Rollout) -> dict:
    """Waits until every canary broker is in the ISR of every partition it hosts (learner warm-up)."""
    waited = {str(b): round(wait_in_isr(run, b, run.spec.warm_up_timeout), 1) for b in run.canary_ids()}
    return {"waited_s": waited}


def lead(run: Rollout) -> dict:
    """Preferred leader election so canary brokers lead their preferred partitions of the probe topic and the
    lead_topics: canary partitions now exist."""
    canaries = set(run.canary_ids())
    topics = {PROBE_TOPIC, *run.spec.lead_topics}
    parts = [p for p in run.partitions() if p.topic in topics]
    missing_topics = sorted(topics - {p.topic for p in parts})
    if missing_topics:
        raise RolloutError(f"lead_topics {missing_topics} do not exist on the cluster")
    elected, off = elect_until_led(run, lambda now: [p.name for p in now if p.topic in topics and p.replicas
                                                    and p.replicas[0] in canaries and p.leader != p.replicas[0]])
    canary_partitions = sorted(p.name for p in run.partitions() if p.topic in topics and p.leader in canaries)
    if not any(name.rpartition("-")[0] == PROBE_TOPIC for name in canary_partitions):
        raise RolloutError(f"no probe partition is led by a canary broker after 60s of preferred leader elections "
                           f"(still not led by their canary broker: {off[:5]})")
    return {"elected": elected, "not_led": off, "canary_partitions": canary_partitions}
