"""Deploy canary, learner warm-up and lead: the canary brokers get the change with the canary marker and the control
brokers a restart with nothing changed (control.py); all rejoin every ISR, then lead their preferred partitions
(canary partitions now exist)."""

from __future__ import annotations

from canary.kafka.admin import ROLLOUT_LOCK_TOPIC
from canary.rollout.broker.control import restart_controls
from canary.rollout.broker.probes import watched
from canary.rollout.broker.rolling import roll_fleet, wait_in_isr
from canary.rollout.broker.rollout import PROBE_TOPIC, Rollout
from canary.rollout.broker.traffic import wait_for_fair_share
from canary.rollout.core import RolloutError, RunStatus
from canary.rollout.core.audit import AuditAction
from canary.rollout.leaders import elect_until_led


def deploy_canary(run: Rollout) -> dict:
    """Rolls each canary broker to the target with the canary marker, then restarts each control broker as it is,
    one at a time under the guard."""
    result: dict = {"canary_brokers": run.canary_ids(), "control_brokers": run.control_ids()}
    with watched(run, "deploy", result):
        result["rolled"] = roll_fleet(run, run.canary_ids(), "canary", warm=False)
        result["controls_restarted"] = restart_controls(run)
    run.state.update(status=RunStatus.CANARY_DEPLOYED)
    return result


def warm_up(run: Rollout) -> dict:
    """Waits until every canary and control broker is in the ISR of every partition it hosts (learner warm-up)."""
    waited = {str(b): round(wait_in_isr(run, b, run.spec.timeouts.warm_up), 1)
              for b in (*run.canary_ids(), *run.control_ids())}
    return {"waited_s": waited}


def lead_selection(run: Rollout, topics: list[str]) -> set[str]:
    """The topics whose preferred partitions the canary brokers lead: every topic but the lock's with lead_topics
    `all` (as a finished roll would lead them), else the probe's and the listed ones (`none`: the probe's alone)."""
    chosen = run.spec.lead_topics
    if chosen == "all":
        return {t for t in topics if t != ROLLOUT_LOCK_TOPIC}
    return {PROBE_TOPIC, *(() if chosen == "none" else chosen)}


def lead(run: Rollout) -> dict:
    """Preferred leader elections so canary (and control) brokers lead their preferred partitions of the chosen
    topics (canary partitions now exist), then a wait for the canary's fair share of the client traffic
    (traffic.py)."""
    canaries = set(run.canary_ids())
    restarted = canaries | set(run.control_ids())
    now = run.partitions()
    topics = lead_selection(run, sorted({p.topic for p in now}))
    missing_topics = sorted(topics - {p.topic for p in now})
    if missing_topics:
        raise RolloutError(f"lead_topics {missing_topics} do not exist on the cluster")
    elected, off = elect_until_led(run, lambda now: [p.name for p in now if p.topic in topics and p.replicas
                                                    and p.replicas[0] in restarted and p.leader != p.replicas[0]])
    canary_partitions = sorted(p.name for p in run.partitions() if p.topic in topics and p.leader in canaries)
    if not any(name.rpartition("-")[0] == PROBE_TOPIC for name in canary_partitions):
        raise RolloutError(f"no probe partition is led by a canary broker after 60s of preferred leader elections "
                           f"(still not led by their canary broker: {off[:5]})")
    share = wait_for_fair_share(run)
    run.audit.record(run.step, AuditAction.TRAFFIC_SHARE, **share)
    led = sorted({name.rpartition("-")[0] for name in canary_partitions})
    return {"elected": len(elected), "not_led": off[:20], "canary_partitions": len(canary_partitions),
            "topics_led": led[:50], "traffic_share": share}
