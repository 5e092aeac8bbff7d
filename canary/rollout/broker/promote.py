"""The promotion of a broker rollout: the rest of the fleet, then the canaries, then the controllers, under the
guards, in gated waves with a look between two; where it stands (approved, the waves whose look passed) is kept in
the run's record (canary.rollout.broker.record.Promotion), so a promotion cut off midway resumes from there. Finalize
and rollback are rooms of their own (finalize.py, rollback.py)."""

from __future__ import annotations

import time

from canary import lanes
from canary.fields import format_utc
from canary.judge import ROLLBACK
from canary.rollout.broker.batches import BatchPlan, plan_batches, serial_plan
from canary.rollout.broker.control import choose_control
from canary.rollout.broker.drain import undrain
from canary.rollout.broker.overrule import overrule
from canary.rollout.broker.preflight import choose_canaries
from canary.rollout.broker.probes import watched
from canary.rollout.broker.record import Promotion
from canary.rollout.broker.rollback import rollback
from canary.rollout.broker.rolling import roll_batches, roll_controllers
from canary.rollout.broker.rollout import Rollout
from canary.rollout.broker.wave_look import look_control, restart_look_control, wave_look
from canary.rollout.broker.waves import Wave, plan_waves, wave_lines, wave_sizes
from canary.rollout.core import Look, RunStatus
from canary.rollout.core.audit import AuditAction
from canary.rollout.core.pause import wait_while_paused
from canary.rollout.core.step import rollback_decided
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
    standing = run.record.promotion or Promotion()  # what earlier attempts and waves left: an approval, the looks
    require_promotable(run, approve or standing.approved)
    result: dict = {}
    with watched(run, "promote", result):
        plan = promotion_plan(run, run.canary_ids())  # shown and recorded before anything restarts
        waves = promotion_waves(run, plan)
        result["plan"] = plan.to_dict() | {"waves": [w.to_dict() for w in waves]}
        standing = standing.model_copy(update={"approved": approve or standing.approved})
        run.state.update(promotion=standing)
        run.audit.record(run.step, AuditAction.PROMOTION_PLAN, approved=standing.approved, **result["plan"])
        for line in plan.lines() + wave_lines(waves, run.spec.promote.look, bool(run.control_ids())):
            run.say("%s", line)
        undrain(run)  # what an attempt cut off midway drained comes back first
        regressed = _roll_waves(run, plan, waves, through_wave, result)
        last = through_wave is None or through_wave >= len(waves)
        if regressed is None and last:
            result["controllers"] = roll_controllers(run, lambda c: run.spec.change.version or c.version)
    if regressed is not None:
        return result | {"regressed": _regressed(run, *regressed), "rollback": rollback(run)}
    if not last:
        return result | {"waves_done": through_wave, "waves": len(waves)}
    return result | _promoted(run)


def wave_skipped(run: Rollout, wave: int) -> str | None:
    """Why a promotion of the waves through `wave` (a task per wave) has nothing to do, or None: the promotion
    rolled back already, or the plan has fewer waves."""
    decided = rollback_decided(run)
    if decided is not None:
        return f"the promotion rolled back: {decided.reason}"
    waves = len(promotion_waves(run))
    return f"the promotion has {waves} wave(s): nothing for wave {wave}" if wave > waves else None


def _roll_waves(run: Rollout, plan: BatchPlan, waves: list[Wave], through: int | None, result: dict
                ) -> tuple[int, Look] | None:
    """Rolls the waves through wave `through` (all: None), each after a person's pause let it, with a look after each
    but the last (not again for a wave whose look passed and that had nothing left to roll). Returns the wave whose
    look saw a regression, with that look; None when none did."""
    result["rolled"], result["looks"] = [], []
    for wave in waves[:through]:
        wait_while_paused(run.store, f"wave {wave.number} of {len(waves)}", run.spec.timeouts.pause,
                          "`kafka-canary rollout resume` (or the run's page in Airflow) lets it go on", run.progress)
        rolled = roll_batches(run, BatchPlan(list(wave.batches), plan.max_batch, plan.headroom), "promoted")
        result["rolled"] += rolled
        looked = wave.number in (run.record.promotion or Promotion()).looked
        if wave.number == len(waves) or not run.spec.promote.look or (looked and not rolled):
            continue
        look, line = _look_after(run, waves, wave.number)
        result["looks"].append({"wave": wave.number, **line})
        if look.verdict == ROLLBACK:
            return wave.number, look
        run.state.update(promotion=(run.record.promotion or Promotion()).passed(wave.number))
    return None


def _look_after(run: Rollout, waves: list[Wave], number: int) -> tuple[Look, dict]:
    """The look after wave `number`: beside a broker of the next waves restarted unchanged (when the run has control
    brokers), the promoted brokers leading their partitions. Returns the look and its line of the step's result."""
    control = look_control(run, waves[number:])
    if control is not None:
        restart_look_control(run, control)
    restore_preferred(run)  # the promoted brokers (and the look's control) lead their partitions in the look
    promoted = [b for w in waves[:number] for b in w.brokers]
    look = wave_look(run, number, promoted, control)
    return look, {"control": control, **look.model_dump(mode="json", include={"verdict", "reason", "failed", "at_s"})}


def _promoted(run: Rollout) -> dict:
    """The promotion's end: preferred leaders back, the run PROMOTED, and when the release's feature levels will be
    finalized (after the bake)."""
    restore_preferred(run)
    # No probe of its own here: verify, the next step, checks the promoted state and then runs a green probe, and a
    # second one back to back found nothing the first would not (it cost every promotion a preflight probe's time).
    run.state.update(status=RunStatus.PROMOTED)
    if not (run.spec.change.version and run.spec.finalize):
        return {}
    due = (time.time() + run.spec.promote.bake) * 1000  # promote ends now (its step record is written after)
    run.audit.record(run.step, AuditAction.FINALIZE_PENDING, after_ms=int(due), bake_s=run.spec.promote.bake)
    run.say("feature levels not finalized: the promoted fleet bakes until %s, then the finalize step raises "
            "them; until then brokers of the previous release can still join the cluster", format_utc(due))
    return {"finalize": f"after the bake, from {format_utc(due)}: `kafka-canary rollout finalize`"}


def _regressed(run: Rollout, wave: int, look: Look) -> str:
    """Records the promotion's ROLLBACK: the look after `wave` saw a regression (overrule.Overrule.WAVE_REGRESSED).
    Returns the reason."""
    judged = run.state.verdict
    assert judged is not None  # promote runs on a verdict (require_promotable)
    verdict = overrule(judged, regressed=(wave, look))
    run.say("%s; the promoted waves roll back", verdict.reason)
    record_verdict(run, verdict)
    return verdict.reason


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


