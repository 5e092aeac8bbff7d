"""Promote and rollback of a broker rollout: the rest of the fleet, then the canaries, then the controllers, under
the guards; finalize, its own step, once the promoted fleet has baked; rollback refused once features were
finalized."""

from __future__ import annotations

import time

from canary import lanes
from canary.cluster import distribution
from canary.fields import format_duration, format_utc
from canary.judge import ROLLBACK
from canary.kafka import features
from canary.rollout.broker.batches import BatchPlan, plan_batches, serial_plan
from canary.rollout.broker.control import choose_control
from canary.rollout.broker.drain import undrain
from canary.rollout.broker.preflight import choose_canaries
from canary.rollout.broker.probes import green_probe, watched
from canary.rollout.broker.rolling import cluster_health, roll_batches, roll_controllers, roll_fleet
from canary.rollout.broker.rollout import Rollout
from canary.rollout.broker.verify import fleet_differences
from canary.rollout.broker.wave_look import look_control, restart_look_control, wave_look
from canary.rollout.broker.waves import Wave, plan_waves, wave_lines, wave_sizes
from canary.rollout.core import Look, RolloutError, RunStatus, Verdict
from canary.rollout.core.pause import wait_while_paused
from canary.rollout.core.verdict import record_verdict, require_promotable
from canary.rollout.leaders import restore_preferred


def promote(run: Rollout, approve: bool = False, through_wave: int | None = None) -> dict:
    """Rolls the baseline brokers, then the canary brokers (dropping the marker), then the controllers to the
    target, in the plan's batches under the guards (each drained first, back in every ISR before the next), in gated
    waves: before each wave a person's pause is honoured, after each but the last a look puts the promoted brokers
    against the rest, and a regression there rolls the promoted waves back (the verdict becomes ROLLBACK). Probes
    throughout. Resumable: brokers already promoted are not restarted, a wave whose look passed is not looked at
    again. `through_wave`: stop after that wave and its look (the Airflow DAG's task per wave); the controllers, the
    preferred leaders come with the last wave. Never finalizes: that is the finalize
    step's, after `promote.bake` (finalize_fleet)."""
    entries = run.audit.entries()  # what earlier attempts and waves left: an approval, the looks that passed
    approved = any(e["action"] == "promotion plan" and e.get("approved") for e in entries)
    require_promotable(run, approve or approved)
    canaries = run.canary_ids()
    target = run.spec.change.version
    result: dict = {}
    regressed: tuple[int, Look] | None = None
    with watched(run, "promote", result):
        plan = promotion_plan(run, canaries)  # shown and recorded before anything restarts
        waves = promotion_waves(run, plan)
        result["plan"] = plan.to_dict() | {"waves": [w.to_dict() for w in waves]}
        run.audit.record(run.step, "promotion plan", approved=approve or approved, **result["plan"])
        for line in plan.lines() + wave_lines(waves, run.spec.promote.look, bool(run.control_ids())):
            run.say("%s", line)
        undrain(run)  # what an attempt cut off midway drained comes back first
        result["rolled"], result["looks"] = [], []
        looked = {e["wave"] for e in entries if e["action"] == "wave look" and e.get("verdict") != ROLLBACK}
        for wave in waves[:through_wave]:
            wait_while_paused(run.store, f"wave {wave.number} of {len(waves)}", run.spec.timeouts.pause,
                              "`kafka-canary rollout resume` (or the run's page in Airflow) lets it go on",
                              run.progress)
            rolled = roll_batches(run, BatchPlan(list(wave.batches), plan.max_batch, plan.headroom), "promoted")
            result["rolled"] += rolled
            if wave.number == len(waves) or not run.spec.promote.look or (wave.number in looked and not rolled):
                continue
            control = look_control(run, waves[wave.number:])
            if control is not None:
                restart_look_control(run, control)
            restore_preferred(run)  # the promoted brokers (and the look's control) lead their partitions in the look
            promoted = [b for w in waves[:wave.number] for b in w.brokers]
            look = wave_look(run, wave.number, promoted, control)
            result["looks"].append({"wave": wave.number, "control": control, **look.model_dump(
                mode="json", include={"verdict", "reason", "failed", "at_s"})})
            if look.verdict == ROLLBACK:
                regressed = (wave.number, look)
                break
        last = through_wave is None or through_wave >= len(waves)
        if regressed is None and last:
            result["controllers"] = roll_controllers(run, lambda c: target or c.version)
    if regressed is not None:
        return result | {"regressed": _regressed(run, *regressed), "rollback": rollback(run)}
    if not last:
        return result | {"waves_done": through_wave, "waves": len(waves)}
    restore_preferred(run)
    # No probe of its own here: verify, the next step, checks the promoted state and then runs a green probe, and a
    # second one back to back found nothing the first would not (it cost every promotion a preflight probe's time).
    run.state.update(status=RunStatus.PROMOTED)
    if target and run.spec.finalize:
        due = (time.time() + run.spec.promote.bake) * 1000  # promote ends now (its step record is written after)
        result["finalize"] = f"after the bake, from {format_utc(due)}: `kafka-canary rollout finalize`"
        run.audit.record(run.step, "finalize pending", after_ms=int(due), bake_s=run.spec.promote.bake)
        run.say("feature levels not finalized: the promoted fleet bakes until %s, then the finalize step raises "
                "them; until then brokers of the previous release can still join the cluster", format_utc(due))
    return result


def _regressed(run: Rollout, wave: int, look: Look) -> str:
    """Records the promotion's ROLLBACK: the look after `wave` saw a regression. Returns the reason."""
    reason = f"the look after promotion wave {wave} saw a regression: {look.reason}"
    run.say("%s; the promoted waves roll back", reason)
    record_verdict(run, Verdict(verdict=ROLLBACK, engine="interim", failed=look.failed, reason=reason))
    return reason


def finalize_fleet(run: Rollout) -> dict:
    """The finalize step: raises the release's feature levels once the verified promoted fleet has run for
    `promote.bake` after promote finished, with a clean look first (every broker and controller on the change and
    running, the cluster healthy and the quorum caught up, a green probe), under the cluster's lock. Refused before
    the bake, saying until when; idempotent (levels already raised change nothing)."""
    status = run.state.status
    if not status.promoted or not status.verified:
        raise RolloutError(f"nothing to finalize yet: the rollout is at '{status}'; finalize follows a verified "
                           f"promotion")
    target = run.spec.change.version
    if not target or not run.spec.finalize:
        why = "the change keeps the release" if not target else "the spec says finalize: false"
        return {"finalized": {}, "why": f"{why}: no feature level is raised"}
    baking = still_baking(run)
    if baking:
        raise RolloutError(baking)
    problems = fleet_differences(run, status)
    seen = cluster_health(run)
    if not seen.healthy:
        problems.append(f"cluster not healthy: {seen.reason()}")
    if problems:
        raise RolloutError("not finalized, the cluster is not as promoted: " + "; ".join(problems))
    taken = run.lock.acquire(run.run_id, len(run.deployer.brokers()))  # LockHeld when another rollout runs
    try:
        probe = green_probe(run, "finalize")
        finalized = finalize(run, target)
    finally:
        if taken:
            run.lock.release(run.run_id)
    return {"finalized": finalized, "probe": probe}


def still_baking(run: Rollout) -> str | None:
    """Why finalize must wait (the promoted fleet is still baking, until when), or None once the bake is over."""
    now = time.time() * 1000
    due = _bake_ends_ms(run, now)
    if now >= due:
        return None
    return (f"the promoted fleet bakes until {format_utc(due)} ({(due - now) / 1000:.0f} s more; promote.bake "
            f"{format_duration(run.spec.promote.bake)}): finalize then. Until then the feature levels stay as they "
            f"were and brokers of the previous release can still join")


def _bake_ends_ms(run: Rollout, now_ms: float) -> float:
    """When the bake ends: `promote.bake` after promote finished (`now_ms` before promote has finished)."""
    record = run.state.record.step("promote")
    finished = record.finished_ms if record and record.finished_ms else now_ms
    return finished + run.spec.promote.bake * 1000



def promotion_plan(run: Rollout, canaries: list[int]) -> BatchPlan:
    """The batches of the promotion, from the cluster as it is: the baseline brokers, then the canaries; one at a
    time in the deployer's order with `promote.max_batch` 1. In batches, the racks without a canary first, then the
    canaries' racks with the canaries last in them, so a canary (on the change already: it drops its marker) may
    restart with its rack mates rather than alone at the end."""
    brokers = run.deployer.brokers()
    racks = {b.broker_id: b.rack for b in brokers}
    down = {b.broker_id for b in brokers if not b.running}
    partitions, registered = run.partitions(), run.admin.registered()
    settings = run.spec.promote
    baseline = [b.broker_id for b in brokers if b.broker_id not in canaries]
    if settings.max_batch == 1:
        return serial_plan(baseline, racks, partitions, settings.headroom, down, registered).then(
            serial_plan(canaries, racks, partitions, settings.headroom, down, registered))
    canary_racks = {lanes.real_rack(racks.get(c)) for c in canaries}
    last = [b for b in baseline if lanes.real_rack(racks.get(b)) in canary_racks]
    order = [b for b in baseline if b not in last] + last + list(canaries)
    return plan_batches(order, racks, partitions, settings.max_batch, settings.headroom, down, registered)


def promotion_waves(run: Rollout, plan: BatchPlan | None = None) -> list[Wave]:
    """The promotion's waves (`plan`: promotion_plan's, read from the cluster when not given)."""
    plan = plan or promotion_plan(run, run.canary_ids())
    return plan_waves(plan, wave_sizes(run.spec.promote.waves, len(run.deployer.brokers())))


def plan_now(run: Rollout) -> dict:
    """The promotion as it would go now, changing nothing: the run's canaries (or those preflight would choose),
    the batches and their notes, then the controllers one at a time."""
    chosen = bool(run.state.record.canary_brokers)
    canaries = run.state.record.canary_brokers or choose_canaries(run, run.deployer.brokers())
    controls = run.control_ids() if chosen else choose_control(run, [b.broker_id for b in run.deployer.brokers()],
                                                               canaries)
    plan = promotion_plan(run, canaries)
    waves = promotion_waves(run, plan)
    controllers = [c.node_id for c in run.deployer.controllers()]
    return {"canary_brokers": canaries, **plan.to_dict(), "waves": [w.to_dict() for w in waves],
            "controllers": controllers,
            "lines": plan.lines() + wave_lines(waves, run.spec.promote.look, bool(controls)) + [
                f"then controllers {controllers}, one at a time, each only while a caught-up majority of the quorum "
                f"remains"]}


def finalize(run: Rollout, version: str) -> dict:
    levels = distribution.release_levels(distribution.release_of(version), distribution.ensure(
        max((version, distribution.TARGET_VERSION), key=distribution.parse_version)))
    wanted = {k: v for k, v in levels.items() if k not in features.NOT_BY_DEFAULT and v > 0}
    changes = run.admin.finalize(wanted)
    if changes:
        run.audit.record("promote", "finalize", changes={k: list(v) for k, v in changes.items()})
    return {k: list(v) for k, v in changes.items()}


def raised_features(run: Rollout) -> dict[str, list[int]]:
    now = run.admin.features().finalized
    before = run.state.snapshot["features"]
    return {f: [before.get(f, 0), level] for f, level in now.items() if level > before.get(f, 0)}


def rollback(run: Rollout) -> dict:
    """Brings every changed broker back to its pre-rollout version, config and rack (canaries first), under the
    guard and warm-up; restores preferred leaders. Refused once features were finalized."""
    if run.state.before is None:
        raise RolloutError("nothing to roll back: preflight never recorded the pre-rollout state")
    raised = raised_features(run)
    if raised:
        detail = ", ".join(f"{f} {a}→{b}" for f, (a, b) in raised.items())
        raise RolloutError(f"refusing to roll back: feature levels were finalized ({detail}) and finalized levels "
                           f"cannot go down, so brokers on the old version would not start; roll forward instead")
    canaries = run.canary_ids()
    order = canaries + [b.broker_id for b in run.deployer.brokers() if b.broker_id not in canaries]
    before = run.state.snapshot["controllers"]
    result: dict = {}
    with watched(run, "rollback", result):
        result["undrained"] = undrain(run)  # a promotion cut off midway may have left partitions drained
        result["rolled"] = roll_fleet(run, order, "baseline", warm=True)
        result["controllers"] = roll_controllers(run, lambda c: before[str(c.node_id)]["version"])
    result["elected"] = restore_preferred(run)
    run.state.update(status=RunStatus.ROLLED_BACK)
    return result
