"""Preflight of a broker rollout: everything is checked before any change (the spec against the cluster, the change's
config values against the broker's definitions, health, no reassignment, the target's features, every broker's
metrics readable, the lock, a green baseline probe); the observations topic's leaders kept off the canary brokers
(the gate's own topic, the one change preflight makes); then the pre-rollout snapshot."""

from __future__ import annotations

import time

from canary.cluster import distribution
from canary.observations import OBSERVATIONS_TOPIC
from canary.probe.load_sizing import size_load
from canary.rollout.broker.config_check import check_change_config
from canary.rollout.broker.control import choose_control
from canary.rollout.broker.metrics import check_broker_metrics
from canary.rollout.broker.probes import green_probe, probe_observations
from canary.rollout.broker.record import BrokerSnapshot
from canary.rollout.broker.rollout import Rollout
from canary.rollout.broker.traffic import MEASURES, file_means, measure_now, share
from canary.rollout.core import RolloutError, RunStatus, SpecMismatch
from canary.rollout.core.audit import AuditAction
from canary.rollout.deployers.base import BrokerInfo
from canary.rollout.leaders import keep_leaders_off, leaders

# The observations topic is the gate's own: its partitions are led by brokers the change does not touch, so a canary
# that refuses writes (or dies) never takes the gate's observations with it (the analysis reads the run's own files).
OBSERVATIONS_OFF_TIMEOUT = 60.0


def choose_canaries(run: Rollout, brokers: list[BrokerInfo]) -> list[int]:
    ids = sorted(b.broker_id for b in brokers)
    asked_for = run.spec.canary
    if asked_for.brokers:
        unknown = sorted(set(asked_for.brokers) - set(ids))
        if unknown:
            raise SpecMismatch(f"canary.brokers: {unknown} are not brokers of this cluster; its broker ids are {ids}")
        chosen = sorted(asked_for.brokers)
    else:
        chosen = ids[-asked_for.count:] if asked_for.count else []
    asked, field = ((len(chosen), "canary.brokers") if asked_for.brokers
                    else (asked_for.count or 0, "canary.count"))
    if asked >= len(ids):
        raise SpecMismatch(f"{field}: {asked} canary broker(s) on a {len(ids)}-broker cluster leaves no "
                           f"baseline to compare with; choose at most {len(ids) - 1}")
    return chosen


def preflight(run: Rollout) -> dict:
    """Checks everything before any change: spec against the cluster, health, no reassignment, features,
    the lock, a green baseline probe; then records the pre-rollout snapshot."""
    spec = run.spec
    brokers = run.deployer.brokers()
    canaries = run.state.record.canary_brokers or choose_canaries(run, brokers)
    controls = run.state.record.control_brokers
    if controls is None:
        controls = choose_control(run, [b.broker_id for b in brokers], canaries)
    down = [b.broker_id for b in brokers if not b.running]
    if down and len(down) == len(brokers):
        raise RolloutError(f"no broker answers at {run.bootstrap_servers} (brokers {down} are not registered): check "
                           f"cluster.bootstrap_servers and cluster.client, and that the brokers run")
    if down:
        raise RolloutError(f"brokers {down} are not running; start them before a rollout")
    check_capabilities(run)
    if spec.change.version:
        run.deployer.prepare(spec.change.version)
    config_checked = check_config(run, brokers, canaries[0])

    seen = run.admin.health([b.broker_id for b in brokers], [c.node_id for c in run.deployer.controllers()])
    if not seen.healthy:
        raise RolloutError(f"the cluster is not healthy: {seen.reason()}; fix it before a rollout")
    moving = [f"{topic}-{partition}" for topic, partition in run.admin.reassignments()]
    if moving:
        raise RolloutError(f"partition reassignments are in flight ({moving[:5]}); wait for them to finish")
    levels = run.admin.features()
    if spec.change.version:
        check_features(spec.change.version, levels.finalized)
    check_lead_topics(run)
    metrics_from = check_broker_metrics(run, [b.broker_id for b in brokers])

    taken = run.lock.acquire(run.run_id, len(brokers))
    run.audit.record("preflight", AuditAction.LOCK_TAKEN if taken else AuditAction.LOCK_ALREADY_HELD)
    run.state.update(canary_brokers=canaries, control_brokers=controls, status=RunStatus.PREFLIGHT)
    try:
        probe, load, traffic = measure_before(run, canaries)
        observations_off = keep_leaders_off(run, OBSERVATIONS_TOPIC, canaries, OBSERVATIONS_OFF_TIMEOUT)
    except Exception:
        if run.state.before is None and run.lock.release(run.run_id):  # nothing changed yet: free the cluster
            run.audit.record("preflight", AuditAction.LOCK_RELEASED_PREFLIGHT_FAILED)
        raise
    if run.state.before is None:
        run.state.update(before=snapshot(run))
        run.audit.record("preflight", AuditAction.SNAPSHOT, before=run.snapshot.model_dump(mode="json"))
    return {"canary_brokers": canaries, "control_brokers": controls, "brokers": len(brokers),
            "finalized": levels.finalized, "probe": probe, "broker_metrics": metrics_from,
            "load": load, "traffic": traffic, "config_checked": config_checked,
            "observations_led_by_canary": observations_off}


def measure_before(run: Rollout, canaries: list[int]) -> tuple[dict, dict, dict]:
    """A green probe long enough to measure each broker before the change (the window's latencies are calibrated by
    it), the load the window will add, and the client traffic the brokers carry: (probe, load, traffic)."""
    spec = run.spec
    probe = green_probe(run, "preflight", reconcile=True, seconds=max(spec.probe.preflight, spec.probe.calibration))
    measured = (*MEASURES, "request_handler_idle_ratio")
    before = file_means(probe_observations(run, probe["probe_run_id"]), measured)
    if not any("bytes_in_per_s" in v for v in before.values()):  # a probe too short for two readings
        before = measure_now(run, measured)
    load = window_load(run, before)
    return probe, load, traffic_before(run, before, canaries, load["rate"])


def check_lead_topics(run: Rollout) -> None:
    """Found missing only in the lead step, listed lead topics would fail the rollout after the first change."""
    if isinstance(run.spec.lead_topics, list) and run.spec.lead_topics:
        existing = run.admin.topics()
        missing = sorted(set(run.spec.lead_topics) - set(existing))
        if missing:
            raise SpecMismatch(f"lead_topics {missing} do not exist on the cluster; create them or remove them "
                               f"from the spec")


def check_config(run: Rollout, brokers: list[BrokerInfo], canary: int) -> dict:
    """The change's config values as the canary's broker will check them at start (canary.rollout.broker.
    config_check): refused before any change, in Kafka's words."""
    change = run.spec.change
    current = next(b.version for b in brokers if b.broker_id == canary)
    return check_change_config(run.admin, dict(change.config),
                               change.version or current, canary, same_version=change.version in (None, current))


def traffic_before(run: Rollout, before: dict[int, dict[str, float]], canaries: list[int], load_rate: float) -> dict:
    """The client traffic the brokers carried before the change (the canary brokers' share of it, whether it is
    representative), and what that means for the verdict: a cluster without representative traffic and no load can
    at best be INCONCLUSIVE when capacity is required, which is better said now than after the window."""
    if not run.spec.broker_metrics.enabled:
        measured = {"fair": False, "representative": False, "reason": "broker metrics are off"}
    else:
        measured = share(before, canaries, run.spec.traffic)
    if run.spec.capacity == "required" and not measured["representative"] and not load_rate:
        measured["note"] = ("without representative traffic in the window the verdict can be INCONCLUSIVE at best "
                            "(a person decides): roll while the cluster carries its traffic, add load, or set "
                            "capacity: not_required")
        run.say("%s: %s", measured["reason"], measured["note"])
    run.audit.record("preflight", AuditAction.TRAFFIC_BEFORE, **measured)
    return measured


def check_capabilities(run: Rollout) -> None:
    """Refuses, before any change, a spec that asks the deployer for what it cannot do."""
    if run.spec.fault.client_delay_ms and "client_delay" not in run.deployer.capabilities:
        raise SpecMismatch(f"fault.client_delay_ms: the {run.spec.cluster.deployer} deployer cannot put a delay in "
                           f"front of a broker (only the embedded local cluster can); remove it from the spec")


def window_load(run: Rollout, before: dict[int, dict[str, float]]) -> dict:
    """The load the window will carry: the spec's rate, or with `rate: auto` what the brokers' client traffic before
    the change (`before`, each broker's means) lacks to be representative, within the ceiling (once: a retried
    preflight keeps the first sizing)."""
    spec = run.spec.load
    if spec.rate != "auto":
        return {"rate": spec.rate, "record_size": spec.record_size, "sized": False}
    sized = run.state.record.load_sizing
    if sized is None:
        sized = size_load(before, run.spec.traffic.min_bytes_per_s, spec.record_size, spec.ceiling_bytes_per_s,
                          required=run.spec.capacity == "required").to_dict()
        run.say("the window's load: %s", sized["rule"])
        run.state.update(load_sizing=sized)
        run.audit.record("preflight", AuditAction.LOAD_SIZED, **sized)
    return {"sized": True, **sized}


def check_features(version: str, finalized: dict[str, int]) -> None:
    """Refuses a target release that cannot run at the cluster's finalized levels (it would not start)."""
    release = distribution.release_of(version)
    newest = max((version, distribution.TARGET_VERSION), key=distribution.parse_version)
    supported = distribution.release_levels(release, distribution.ensure(newest))
    too_high = {f: (level, supported.get(f, 0)) for f, level in finalized.items()
                if f != "kraft.version" and level > supported.get(f, 0)}
    if too_high:
        detail = ", ".join(f"{f} finalized at {lvl} but {release} goes up to {top}"
                           for f, (lvl, top) in too_high.items())
        raise SpecMismatch(f"Kafka {version} cannot join this cluster: {detail}; choose a release at least as new "
                           f"as the finalized features")


def snapshot(run: Rollout) -> BrokerSnapshot:
    levels = run.admin.features()
    return BrokerSnapshot.model_validate({
        "taken_ms": int(time.time() * 1000),
        "brokers": {str(b.broker_id): b.to_dict() for b in run.deployer.brokers()},
        "controllers": {str(c.node_id): c.to_dict() for c in run.deployer.controllers()},
        "features": levels.finalized,
        "leaders": leaders(run),
    })
