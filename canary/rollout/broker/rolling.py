"""Rolling brokers and controllers: one at a time (each restart allowed by the safe-roll guard, each broker back in
the ISR of its partitions, learner warm-up, before the next, a broker that is down first), or a promotion's batches
(the guard on the set, the batch drained, restarted together, back in every ISR before the next)."""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from canary.broker_metrics import BrokerMetricsSource
from canary.errors import CanaryError
from canary.kafka import health
from canary.kafka.wait import POLL, WaitTimeout, wait_until
from canary.rollout import guard
from canary.rollout.broker.batches import BatchPlan
from canary.rollout.broker.desired import desired_state, is_as_desired
from canary.rollout.broker.drain import drain, undrain
from canary.rollout.broker.metrics import broker_metrics_source
from canary.rollout.broker.recovery import Recovery
from canary.rollout.broker.restarted import RestartCheck
from canary.rollout.broker.rollout import Rollout
from canary.rollout.core import RolloutError
from canary.rollout.core.audit import AuditAction
from canary.rollout.deployers.base import BrokerInfo


class GuardRefused(RolloutError):
    """The safe-roll guard did not allow a restart within the guard timeout."""


def wait_for_guard(run: Rollout, brokers: int | list[int]) -> None:
    """Blocks until the safe-roll guard allows `brokers` (one, or a batch: together, with the spec's headroom) to
    restart, or raises GuardRefused."""
    batch = [brokers] if isinstance(brokers, int) else brokers
    down: set[int] = set()  # brokers the deployer says are stopped, at the last look
    named = {"broker": batch[0]} if len(batch) == 1 else {"brokers": batch}  # as the audit log names them

    def check() -> str | None:
        down.clear()
        down.update(b.broker_id for b in run.deployer.brokers() if not b.running and b.broker_id not in batch)
        d = guard.decide(batch, run.partitions(), down, headroom=run.spec.promote.headroom)
        return None if d.allowed else d.reason()

    try:
        waited = wait_until(f"safe-roll guard for {guard.who(batch)}", run.spec.timeouts.guard, check, run.progress)
    except WaitTimeout as exc:
        run.audit.record(run.step, AuditAction.GUARD_REFUSED, **named, reason=str(exc), down=sorted(down))
        fix = (f"broker(s) {sorted(down)} are down: start them, or run promote or rollback, which start a broker "
               f"that is down first" if down else "bring the named partitions' replicas back into the ISR")
        raise GuardRefused(f"{exc}. The broker was not restarted; {fix} (or raise timeouts.guard) and run the step "
                           f"again") from None
    if waited > POLL:
        run.audit.record(run.step, AuditAction.GUARD_ALLOWED, **named, waited_s=round(waited, 1))


def wait_for_quorum(run: Rollout, voters: list[int], node: int) -> None:
    """Blocks until controller `node` may restart without the quorum losing its caught-up majority, or raises
    GuardRefused (nothing restarted)."""
    def check() -> str | None:
        return guard.quorum_refuses(voters, run.admin.lagging_voters(voters), node)

    try:
        waited = wait_until(f"quorum guard for controller {node}", run.spec.timeouts.guard, check, run.progress)
    except WaitTimeout as exc:
        run.audit.record(run.step, AuditAction.QUORUM_GUARD_REFUSED, controller=node, reason=str(exc))
        raise GuardRefused(f"{exc}. The controller was not restarted; bring the lagging voters back (a voter that is "
                           f"down, or far behind the metadata log), or raise timeouts.guard, and run the step "
                           f"again") from None
    if waited > POLL:
        run.audit.record(run.step, AuditAction.QUORUM_GUARD_ALLOWED, controller=node, waited_s=round(waited, 1))


def wait_in_isr(run: Rollout, brokers: int | list[int], timeout: float,
                partitions: Callable[[], list[guard.PartitionView]] | None = None) -> float:
    """Learner warm-up for one broker, or a batch: registered, then in the ISR of every partition each hosts
    (`partitions`: how they are read, the run's own by default). `timeout` is how long it may go without progress
    (canary.rollout.broker.recovery): a slow log recovery is waited for, with progress, a stuck broker is not."""
    batch = [brokers] if isinstance(brokers, int) else brokers
    recovery = Recovery(_metrics_or_none(run), batch)
    return wait_until(f"learner warm-up of {guard.who(batch)}", timeout,
                      lambda: recovery.describe(guard.learners_missing(run.admin.registered(),
                                                                       partitions or run.partitions, batch)),
                      run.progress, moving=recovery.moved)


def _metrics_or_none(run: Rollout) -> BrokerMetricsSource | None:
    """The rollout's broker metrics, or None when they are off or cannot be had (the warm-up then goes by the
    cluster's answers alone)."""
    try:
        return broker_metrics_source(run)
    except CanaryError:
        return None


class ProcessWatch:
    """Asks the deployer every CHECK_EVERY seconds whether a rolled broker's process still runs: one that died after
    its roll (a config it refused at start, a crash) fails the roll then, not at the end of the warm-up timeout. Two
    answers in a row, so a supervisor restarting it in between is not taken for a death."""

    CHECK_EVERY = 5.0

    def __init__(self, run: Rollout, broker_id: int, started: float):
        self.run, self.broker_id, self.started = run, broker_id, started
        self.last = time.monotonic()
        self.down = 0

    def check(self) -> None:
        if time.monotonic() - self.last < self.CHECK_EVERY:
            return
        self.last = time.monotonic()
        self.down = self.down + 1 if self.run.deployer.process_running(self.broker_id) is False else 0
        if self.down >= 2:
            cause = self.run.deployer.exit_cause(self.broker_id)
            raise RolloutError(f"broker {self.broker_id} stopped after its roll: the deployer reports its process not "
                               f"running {time.monotonic() - self.started:.0f}s after it was started; " + (
                                   f"its log says: {cause}" if cause else
                                   "a config it refused at start, or a crash: its log says why"))


def needs_roll(run: Rollout, current: BrokerInfo, phase: str) -> bool:
    """Whether a broker (`current`: as the deployer described it) is not yet as `phase` wants it, or not running (a
    crash left it down after its change was recorded). A control broker is restarted as it is
    (canary.rollout.broker.control)."""
    want = desired_state(run, current.broker_id, phase)
    return not (is_as_desired(current, want) and current.running) or phase == "control"


def roll_broker(run: Rollout, broker_id: int, phase: str, warm: bool, guarded: bool = False) -> dict | None:
    """Converges one broker to `phase` under the guard (`guarded`: its batch's guard allowed it already); None when
    it already was there."""
    current = run.broker(broker_id)
    want = desired_state(run, broker_id, phase)
    if not needs_roll(run, current, phase):
        run.say("broker %s already %s (%s), no restart", broker_id, phase, want["version"])
        return None
    if current.running and not guarded:
        wait_for_guard(run, broker_id)
    # else: a broker that is down is in no live ISR, so starting it takes nothing away (and the guard may be waiting
    # for it); the guard is not asked.
    run.say("rolling broker %s to %s %s", broker_id, phase, want["version"])
    run.audit.record(run.step, AuditAction.RESTART_BROKER, broker=broker_id, phase=phase, was_running=current.running,
                   before=current.to_dict(), after=want)
    restart = RestartCheck(run, broker_id) if phase == "control" else None  # nothing else shows it restarted
    started = time.monotonic()
    run.deployer.roll_broker(broker_id, **want)
    alive = ProcessWatch(run, broker_id, started)

    def registered() -> str | None:
        racks = run.admin.registered()
        if broker_id not in racks:
            alive.check()
            return f"broker {broker_id} not registered yet"
        return None if (racks[broker_id] or None) == (want["rack"] or None) else (
            f"broker {broker_id} still advertises rack {racks[broker_id]!r}")
    wait_until(f"broker {broker_id} registration", run.spec.timeouts.warm_up, registered, run.progress)
    proof = restart.confirm() if restart is not None else None
    result = {"broker": broker_id, "phase": phase, "version": want["version"],
              "registered_s": round(time.monotonic() - started, 1)} | ({"process_started": proof} if proof else {})
    if warm:
        wait_in_isr(run, broker_id, run.spec.timeouts.warm_up)
        result["in_isr_s"] = round(time.monotonic() - started, 1)
    run.audit.record(run.step, AuditAction.BROKER_RESTARTED, **result)
    return result


def roll_fleet(run: Rollout, order: list[int], phase: str, warm: bool) -> list[dict]:
    """Converges the brokers of `order` to `phase` one at a time, a broker that is down always next (Strimzi's
    roller takes unready pods first): starting it cannot lower availability, and while it is down the guard refuses
    every broker that shares a partition with it. A broker that goes down after its turn is left to the next run
    of the step (it may have crashed because of the change)."""
    rolled, todo = [], list(order)
    while todo:
        down = {b.broker_id for b in run.deployer.brokers() if not b.running}
        broker = next((b for b in todo if b in down), todo[0])
        todo.remove(broker)
        if (done := roll_broker(run, broker, phase, warm)) is not None:
            rolled.append(done)
    return rolled


def wait_batch_in_isr(run: Rollout, brokers: list[int]) -> int | None:
    """Learner warm-up of a batch restarted together; returns the fewest in-sync replicas above min ISR seen at any
    look meanwhile (the guard's promise, as the cluster showed it; None: no partition to judge)."""
    lowest: list[int] = []

    def observed() -> list[guard.PartitionView]:
        views = run.partitions()
        lowest.extend(h for h in [guard.isr_headroom(views)] if h is not None)
        return views
    wait_in_isr(run, brokers, run.spec.timeouts.warm_up, observed)
    return min(lowest, default=None)


def roll_batches(run: Rollout, plan: BatchPlan, phase: str) -> list[dict]:
    """Converges the brokers of `plan` to `phase` batch by batch: the guard asked once for the brokers of a batch
    that need a restart, together; with `promote.drain` the batch's leadership moved to brokers that stay up first;
    its brokers restarted at once (one after the other when the deployer cannot take concurrent rolls); all of them
    back in every ISR (learner warm-up), the drained partitions' preferred leaders back, and only then the next
    batch."""
    rolled: list[dict] = []
    for batch in plan.batches:
        now = {b.broker_id: b for b in run.deployer.brokers()}
        todo = [b for b in batch.brokers if needs_roll(run, now[b], phase)]
        if not todo:
            run.say("brokers %s already %s, no restart", list(batch.brokers), phase)
            continue
        running = [b for b in todo if now[b].running]
        if running:
            wait_for_guard(run, running)
        drained = drain(run, running) if running and run.spec.promote.drain else None
        started = time.monotonic()
        done = _restart_together(run, todo, phase)
        headroom = wait_batch_in_isr(run, todo)
        away = {"batch": list(batch.brokers), "batch_in_isr_s": round(time.monotonic() - started, 1),
                "isr_headroom_min": headroom}
        if drained is not None:
            away |= {"drained": drained["drained"], "restored": len(undrain(run))}
        run.audit.record(run.step, AuditAction.BATCH_IN_ISR, **away)
        rolled += [r | away for r in done]
    return rolled


def _restart_together(run: Rollout, brokers: list[int], phase: str) -> list[dict]:
    """Restarts `brokers` (the guard allowed them together) at once, each waited for until registered; one after
    the other when the deployer cannot take concurrent rolls. Every roll finishes before an error is raised."""
    def one(broker_id: int) -> dict | None:
        return roll_broker(run, broker_id, phase, warm=False, guarded=True)
    if len(brokers) < 2 or "concurrent_rolls" not in run.deployer.capabilities:
        return [r for b in brokers if (r := one(b)) is not None]
    with ThreadPoolExecutor(max_workers=len(brokers), thread_name_prefix="roll") as pool:
        futures = [pool.submit(one, b) for b in brokers]
    errors = [e for f in futures if (e := f.exception()) is not None]
    if errors:
        raise errors[0]
    return [r for f in futures if (r := f.result()) is not None]


def roll_controllers(run: Rollout, version_of: Callable) -> list[int]:
    """Controllers last, one at a time, each only while the others still caught up are a majority of the quorum
    (guard.quorum_refuses), each back in the quorum before the next."""
    rolled = []
    voters = [c.node_id for c in run.deployer.controllers()]
    for c in run.deployer.controllers():
        version = version_of(c)
        if c.version == version:
            continue
        wait_for_quorum(run, voters, c.node_id)
        run.say("rolling controller %s to %s", c.node_id, version)
        run.audit.record(run.step, AuditAction.RESTART_CONTROLLER, controller=c.node_id, before=c.version,
                         after=version)
        run.deployer.roll_controller(c.node_id, version=version)
        wait_until(f"controller {c.node_id} back in the quorum", run.spec.timeouts.warm_up,
                   lambda: quorum_missing(run), run.progress)
        rolled.append(c.node_id)
    return rolled


def cluster_health(run: Rollout) -> health.ClusterHealth:
    """Every broker the deployer runs registered, every partition online and replicated, the quorum caught up."""
    return run.admin.health([b.broker_id for b in run.deployer.brokers()],
                            [c.node_id for c in run.deployer.controllers()])


def quorum_missing(run: Rollout) -> str | None:
    """What keeps the cluster from healthy (None: healthy): what a restarted controller waits for."""
    seen = cluster_health(run)
    return None if seen.healthy else seen.reason()
