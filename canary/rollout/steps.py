"""The rollout steps of DESIGN.md §3. Each step reads the real cluster, converges it towards what the step
promises, records every action in the audit log and returns a small JSON-able result. Re-running a step (a
retried task, a resumed rollout) does only what is still missing.

    rollout = Rollout(load_spec("rollout.yaml"))
    preflight(rollout); deploy_canary(rollout); warm_up(rollout); lead(rollout)
    verdict = gate(rollout)["verdict"]
    promote(rollout) if verdict == "PROMOTE" else rollback(rollout)
    verify(rollout)
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import yaml
from confluent_kafka import KafkaException
from kafka.errors import KafkaError

from canary import lanes
from canary.cluster import distribution
from canary.errors import CanaryError, ClusterError
from canary.judge import INCONCLUSIVE, PROMOTE, ROLLBACK, Aggregates, judge
from canary.kafka import features, health
from canary.kafka.admin import TopicAdmin
from canary.kafka.clients import admin_client
from canary.kafka.secrets import scrub_text
from canary.kafka.settings import kafka_python_settings
from canary.observations import read_file_counted
from canary.probe.config import ProbeConfig
from canary.probe.runner import Probe, ProbeSummary
from canary.rollout import guard
from canary.rollout.audit import AuditLog
from canary.rollout.deployer import BrokerInfo, Deployer, open_deployer
from canary.rollout.lock import LOCK_TOPIC, ClusterLock
from canary.rollout.run import RunState, default_run_dir
from canary.rollout.spec import RolloutSpec, judge_settings

log = logging.getLogger("canary.rollout")
PROBE_TOPIC = "__kafka_canary"
POLL = 1.0


class RolloutError(CanaryError):
    """A step cannot go on; the message says why and what to do."""


class GuardRefused(RolloutError):
    """The safe-roll guard did not allow a restart within the guard timeout."""


class RolloutRun:
    """What every kind of rollout has: its spec, the deployer of its cluster, the run directory (state and audit log)
    and a lock on the cluster."""

    LOG_PREFIX = ""  # before the step's name in progress lines

    def __init__(self, spec, run_dir: str | Path | None = None, deployer: Deployer | None = None):
        self.spec = spec
        self.run_id = spec.effective_run_id
        self.run_dir = Path(run_dir) if run_dir else default_run_dir(self.run_id)
        self.deployer = deployer or open_deployer(spec.deployer, spec.cluster_dir)
        self.state = RunState.open(self.run_dir, self.run_id, spec.to_dict(), spec.secret_values)
        self.audit = AuditLog(self.run_dir / "audit.jsonl", self.run_id, spec.secret_values)
        self.lock = ClusterLock(self.bootstrap_servers, spec.client)
        self.step = "-"

    @property
    def bootstrap_servers(self) -> str:
        return self.deployer.bootstrap_servers

    def say(self, text: str, *args) -> None:
        log.info(f"[{self.LOG_PREFIX}%s] " + text, self.step, *args)


class Rollout(RolloutRun):
    """One broker rollout."""

    spec: RolloutSpec

    def partitions(self) -> list[guard.PartitionView]:
        return guard.observe(self.bootstrap_servers, self.spec.client)

    def canary_ids(self) -> list[int]:
        ids = self.state.data["canary_brokers"]
        if ids is None:
            raise RolloutError("preflight has not chosen the canary brokers yet; run `kafka-canary rollout "
                               "preflight` first")
        return ids

    def broker(self, broker_id: int) -> BrokerInfo:
        for b in self.deployer.brokers():
            if b.broker_id == broker_id:
                return b
        raise RolloutError(f"broker {broker_id} is no longer in the cluster")


def describe(exc: BaseException) -> str:
    """An exception as the audit log and a verdict's reason show it: its message, or its type when it has none
    (a TimeoutError from a future says nothing)."""
    return str(exc) or type(exc).__name__


def run_step(name: str, fn: Callable[[Rollout], dict]) -> Callable[[Rollout], dict]:
    """Wraps a step: attempt counting in run.json, start/finish/failure in the audit log; the result has no secret
    value in it (a text that quoted one shows *** instead)."""

    def step(r: Rollout) -> dict:
        r.step = name
        attempt = r.state.step_started(name)
        r.audit.record(name, "step started", attempt=attempt)
        try:
            result = fn(r)
            if r.spec.secret_values:  # the result lands in XCom and on the CLI's output: never a password
                result = json.loads(scrub_text(json.dumps(result, default=str), r.spec.secret_values))
        except BaseException as exc:
            r.state.step_failed(name, describe(exc))
            r.audit.record(name, "step failed", attempt=attempt, error=describe(exc))
            raise
        r.state.step_finished(name, result)
        r.audit.record(name, "step finished", attempt=attempt, result=result)
        return result

    step.__name__ = name
    step.__doc__ = fn.__doc__
    return step


# ----- desired states -----

def _target_version(r: Rollout, before: dict) -> str:
    return r.spec.change.version or before["version"]


def _target_config(r: Rollout, before: dict) -> dict[str, str]:
    config = dict(before["config"])
    for key, value in r.spec.change.config.items():
        if value is None:
            config.pop(key, None)
        else:
            config[key] = value
    return config


def _want(r: Rollout, broker_id: int, phase: str) -> dict:
    """What broker `broker_id` should look like in `phase`: canary, promoted or baseline (= before)."""
    before = r.state.before["brokers"][str(broker_id)]
    if phase == "baseline":
        return {"version": before["version"], "config": before["config"], "rack": before["rack"],
                "client_delay_ms": 0.0}
    canary = phase == "canary"
    rack = lanes.canary_rack(before["rack"]) if canary else lanes.real_rack(before["rack"])
    return {"version": _target_version(r, before), "config": _target_config(r, before), "rack": rack,
            "client_delay_ms": r.spec.fault.client_delay_ms if canary else 0.0}


def _is(b: BrokerInfo, want: dict) -> bool:
    return (b.version == want["version"] and b.config == want["config"] and (b.rack or None) == (want["rack"] or None)
            and float(b.client_delay_ms) == float(want["client_delay_ms"]))


# ----- waiting -----

def _wait(r: Rollout, what: str, timeout: float, check: Callable[[], str | None], progress_every: float = 10.0
          ) -> float:
    """Polls `check` (None = done, else what is still missing) until done; raises RolloutError at the timeout.
    Returns the seconds waited."""
    start = time.monotonic()
    last_report = start
    while True:
        try:
            missing = check()
        except (KafkaException, KafkaError, ClusterError, TimeoutError) as exc:
            # TimeoutError: an admin future not resolved in time (a broker just died); it says nothing itself
            missing = f"cluster not answering: {describe(exc)}"
        if missing is None:
            return time.monotonic() - start
        now = time.monotonic()
        if now - start > timeout:
            raise RolloutError(f"{what}: not done after {timeout:.0f}s: {missing}")
        if now - last_report >= progress_every:
            r.say("%s: waiting %.0fs, %s", what, now - start, missing)
            last_report = now
        time.sleep(POLL)


def _registered(r: Rollout) -> dict[int, str | None]:
    """Registered, unfenced brokers and their racks."""
    admin = admin_client(r.bootstrap_servers, r.spec.client)
    cluster = admin.describe_cluster(request_timeout=10).result(timeout=10)
    return {n.id: n.rack for n in cluster.nodes}


def _wait_guard(r: Rollout, broker_id: int) -> None:
    """Blocks until the safe-roll guard allows `broker_id` to restart, or raises GuardRefused."""
    down: set[int] = set()  # brokers the deployer says are stopped, at the last look

    def check() -> str | None:
        down.clear()
        down.update(b.broker_id for b in r.deployer.brokers() if not b.running and b.broker_id != broker_id)
        d = guard.decide(broker_id, r.partitions(), down)
        return None if d.allowed else d.reason()

    try:
        waited = _wait(r, f"safe-roll guard for broker {broker_id}", r.spec.guard_timeout, check)
    except RolloutError as exc:
        r.audit.record(r.step, "guard refused", broker=broker_id, reason=str(exc), down=sorted(down))
        fix = (f"broker(s) {sorted(down)} are down: start them, or run promote or rollback, which start a broker "
               f"that is down first" if down else "bring the named partitions' replicas back into the ISR")
        raise GuardRefused(f"{exc}. The broker was not restarted; {fix} (or raise timeouts.guard) and run the step "
                           f"again") from None
    if waited > POLL:
        r.audit.record(r.step, "guard allowed after waiting", broker=broker_id, waited_s=round(waited, 1))


def _wait_in_isr(r: Rollout, broker_id: int, timeout: float) -> float:
    """Learner warm-up for one broker: registered, then in the ISR of every partition it hosts."""
    def check() -> str | None:
        if broker_id not in _registered(r):
            return f"broker {broker_id} not registered yet"
        behind = guard.not_in_isr(broker_id, r.partitions())
        return f"broker {broker_id} not yet in the ISR of {len(behind)} partition(s): {behind[:5]}" if behind else None
    return _wait(r, f"learner warm-up of broker {broker_id}", timeout, check)


def _roll(r: Rollout, broker_id: int, phase: str, warm: bool) -> dict | None:
    """Converges one broker to `phase` under the guard; None when it already was there."""
    current = r.broker(broker_id)
    want = _want(r, broker_id, phase)
    if _is(current, want) and current.running:
        r.say("broker %s already %s (%s), no restart", broker_id, phase, want["version"])
        return None  # a crash left it down after its change was recorded: start it below
    if current.running:
        _wait_guard(r, broker_id)
    # else: a broker that is down is in no live ISR, so starting it takes nothing away (and the guard may be waiting
    # for it); the guard is not asked.
    r.say("rolling broker %s to %s %s", broker_id, phase, want["version"])
    r.audit.record(r.step, "restart broker", broker=broker_id, phase=phase, was_running=current.running,
                   before=current.to_dict(), after=want)
    started = time.monotonic()
    r.deployer.roll_broker(broker_id, **want)

    def registered() -> str | None:
        racks = _registered(r)
        if broker_id not in racks:
            return f"broker {broker_id} not registered yet"
        return None if (racks[broker_id] or None) == (want["rack"] or None) else (
            f"broker {broker_id} still advertises rack {racks[broker_id]!r}")
    _wait(r, f"broker {broker_id} registration", r.spec.warm_up_timeout, registered)
    result = {"broker": broker_id, "phase": phase, "version": want["version"],
              "registered_s": round(time.monotonic() - started, 1)}
    if warm:
        _wait_in_isr(r, broker_id, r.spec.warm_up_timeout)
        result["in_isr_s"] = round(time.monotonic() - started, 1)
    r.audit.record(r.step, "broker restarted", **result)
    return result


def _roll_fleet(r: Rollout, order: list[int], phase: str, warm: bool) -> list[dict]:
    """Converges the brokers of `order` to `phase` one at a time, a broker that is down always next (Strimzi's
    roller takes unready pods first): starting it cannot lower availability, and while it is down the guard refuses
    every broker that shares a partition with it. A broker that goes down after its turn is left to the next run
    of the step (it may have crashed because of the change)."""
    rolled, todo = [], list(order)
    while todo:
        down = {b.broker_id for b in r.deployer.brokers() if not b.running}
        broker = next((b for b in todo if b in down), todo[0])
        todo.remove(broker)
        if (done := _roll(r, broker, phase, warm)) is not None:
            rolled.append(done)
    return rolled


# ----- snapshots -----

def _leaders(r: Rollout) -> dict[str, dict]:
    return {p.name: {"leader": p.leader, "preferred": p.replicas[0] if p.replicas else -1}
            for p in r.partitions() if p.topic != LOCK_TOPIC}


def _snapshot(r: Rollout) -> dict:
    levels = features.describe(r.bootstrap_servers, kafka_python_settings(r.spec.client))
    return {
        "taken_ms": int(time.time() * 1000),
        "brokers": {str(b.broker_id): b.to_dict() for b in r.deployer.brokers()},
        "controllers": {str(c.node_id): c.to_dict() for c in r.deployer.controllers()},
        "features": levels.finalized,
        "leaders": _leaders(r),
    }


def _elect_preferred(r: Rollout, names: list[str]) -> list[str]:
    """Preferred leader elections for `topic-partition` names; returns failures."""
    admin = TopicAdmin(r.bootstrap_servers, r.spec.client)
    by_topic: dict[str, list[int]] = {}
    for name in names:
        topic, _, part = name.rpartition("-")
        by_topic.setdefault(topic, []).append(int(part))
    failures = []
    for topic, parts in sorted(by_topic.items()):
        failures += admin.elect(topic, sorted(parts))
    return failures


def _elect_until_led(r: Rollout, select: Callable[[list[guard.PartitionView]], list[str]], timeout: float = 60.0
                     ) -> tuple[list[str], list[str]]:
    """Preferred leader elections for the partitions `select` picks, repeated until none is left or `timeout`
    passes (a preferred replica still catching up is not electable yet). Returns (elected, still off)."""
    elected: list[str] = []
    deadline = time.monotonic() + timeout
    while True:
        off = select(r.partitions())
        if not off or time.monotonic() > deadline:
            return elected, off
        r.say("preferred leader election for %d partition(s)", len(off))
        failures = _elect_preferred(r, off)
        r.audit.record(r.step, "preferred leader election", partitions=off, failures=failures)
        elected += [n for n in off if n not in elected]
        time.sleep(2 * POLL)


def _restore_preferred(r: Rollout) -> list[str]:
    """Every partition back on its preferred leader (bounded wait); returns the partitions elected."""
    elected, _ = _elect_until_led(r, lambda parts: [p.name for p in parts if p.topic != LOCK_TOPIC and p.replicas
                                                    and p.leader != p.replicas[0]])
    return elected


# ----- probe -----

def _probe_config(r: Rollout, name: str, seconds: float | None = None, reconcile: bool = False) -> ProbeConfig:
    """The probe of one phase of the rollout, its observations in the run directory. Only the preflight probe
    reconciles the canary topic: during the rollout the rollout alone changes the cluster."""
    observations = r.run_dir / f"observations-{name}.jsonl"
    observations.unlink(missing_ok=True)
    return ProbeConfig(bootstrap_servers=r.bootstrap_servers, rate=r.spec.probe_rate, duration=seconds,
                       run_id=f"{r.run_id}-{name}", producer_id=f"rollout-{r.run_id}", client=dict(r.spec.client),
                       observations_file=str(observations), rtt_sla=15.0, message_timeout=10.0, reconcile=reconcile,
                       away_grace=300.0)  # a broker the rollout restarts is still probed, not dropped


def _probe(r: Rollout, name: str, seconds: float, reconcile: bool = False) -> ProbeSummary:
    r.say("probe %s for %.0fs at %g msg/s per partition", name, seconds, r.spec.probe_rate)
    return Probe(_probe_config(r, name, seconds, reconcile)).run()


@contextlib.contextmanager
def _watched(r: Rollout, name: str, result: dict) -> Iterator[None]:
    """Probe traffic for as long as a step rolls brokers: acknowledged messages lost during the rolls land in
    `result["probe"]` (the goal is none)."""
    probe = Probe(_probe_config(r, name))
    probe.start()
    try:
        yield
    finally:
        summary = probe.stop()
        result["probe"] = {"probe_run_id": summary.run_id, **{
            k: sum(t[k] for t in summary.lanes.values()) for k in ("sent", "acked", "lost", "produce_errors")}}
        r.audit.record(r.step, "probe during the rolls", **result["probe"])


def _probe_problems(summary: ProbeSummary) -> list[str]:
    """Why a probe run is not green: nothing acknowledged, any acknowledged message lost, errors above 1 %."""
    problems = []
    if not summary.acked:
        problems.append("no message was acknowledged")
    for lane, t in summary.lanes.items():
        if t["lost"]:
            problems.append(f"{t['lost']} acknowledged message(s) lost in lane {lane}")
        if t["sent"] and t["produce_errors"] / t["sent"] > 0.01:
            problems.append(f"{t['produce_errors']} of {t['sent']} produces failed in lane {lane}")
    return problems


def _green_probe(r: Rollout, name: str, tries: int = 2, reconcile: bool = False) -> dict:
    """A short probe that must be green; one failed try is repeated, so a passing hiccup (a busy machine,
    a topic just created) does not stop a rollout, while a real problem fails both tries."""
    for attempt in range(1, tries + 1):
        summary = _probe(r, f"{name}-{attempt}", r.spec.preflight_probe, reconcile)
        problems = _probe_problems(summary)
        result = {"probe_run_id": summary.run_id, "acked": summary.acked,
                  "lost": sum(t["lost"] for t in summary.lanes.values()), "problems": problems}
        r.audit.record(r.step, "probe", **result)
        if not problems:
            return result
    raise RolloutError(f"the {name} probe is not green (tried {tries} times): {'; '.join(problems)}")


# ----- 1. preflight -----

def _choose_canaries(r: Rollout, brokers: list[BrokerInfo]) -> list[int]:
    ids = sorted(b.broker_id for b in brokers)
    if r.spec.canary_brokers:
        unknown = sorted(set(r.spec.canary_brokers) - set(ids))
        if unknown:
            raise RolloutError(f"canary.brokers: {unknown} are not brokers of this cluster; its broker ids are {ids}")
        chosen = sorted(r.spec.canary_brokers)
    else:
        chosen = ids[-r.spec.canary_count:] if r.spec.canary_count else []
    asked, field = (len(chosen), "canary.brokers") if r.spec.canary_brokers else (r.spec.canary_count, "canary.count")
    if asked >= len(ids):
        raise RolloutError(f"{field}: {asked} canary broker(s) on a {len(ids)}-broker cluster leaves no "
                           f"baseline to compare with; choose at most {len(ids) - 1}")
    return chosen


def _preflight(r: Rollout) -> dict:
    """Checks everything before any change: spec against the cluster, health, no reassignment, features,
    the lock, a green baseline probe; then records the pre-rollout snapshot."""
    spec = r.spec
    brokers = r.deployer.brokers()
    canaries = r.state.data["canary_brokers"] or _choose_canaries(r, brokers)
    down = [b.broker_id for b in brokers if not b.running]
    if down:
        raise RolloutError(f"brokers {down} are not running; start them before a rollout")
    if spec.change.version:
        r.deployer.prepare(spec.change.version)

    seen = health.check(r.bootstrap_servers, [b.broker_id for b in brokers], client_config=spec.client,
                        expected_voters=[c.node_id for c in r.deployer.controllers()])
    if not seen.healthy:
        raise RolloutError(f"the cluster is not healthy: {seen.reason()}; fix it before a rollout")
    moving = [f"{topic}-{partition}" for topic, partition in
              TopicAdmin(r.bootstrap_servers, spec.client).all_reassignments()]
    if moving:
        raise RolloutError(f"partition reassignments are in flight ({moving[:5]}); wait for them to finish")
    levels = features.describe(r.bootstrap_servers, kafka_python_settings(spec.client))
    if spec.change.version:
        _check_features(spec.change.version, levels.finalized)
    if spec.lead_topics:  # found missing only in the lead step, they would fail the rollout after the first change
        existing = admin_client(r.bootstrap_servers, spec.client).list_topics(timeout=15).topics
        missing = sorted(set(spec.lead_topics) - set(existing))
        if missing:
            raise RolloutError(f"lead_topics {missing} do not exist on the cluster; create them or remove them "
                               f"from the spec")

    taken = r.lock.acquire(r.run_id, len(brokers))
    r.audit.record("preflight", "lock taken" if taken else "lock already held by this rollout")
    r.state.update(canary_brokers=canaries, status="preflight")
    try:
        probe = _green_probe(r, "preflight", reconcile=True)
    except CanaryError:
        if r.state.before is None and r.lock.release(r.run_id):  # nothing changed yet: free the cluster
            r.audit.record("preflight", "lock released: preflight failed before any change")
        raise
    if r.state.before is None:
        r.state.update(before=_snapshot(r))
        r.audit.record("preflight", "snapshot", before=r.state.before)
    return {"canary_brokers": canaries, "brokers": len(brokers), "finalized": levels.finalized, "probe": probe}


def _check_features(version: str, finalized: dict[str, int]) -> None:
    """Refuses a target release that cannot run at the cluster's finalized levels (it would not start)."""
    release = distribution.release_of(version)
    newest = max((version, distribution.TARGET_VERSION), key=distribution.parse_version)
    supported = distribution.release_levels(release, distribution.ensure(newest))
    too_high = {f: (level, supported.get(f, 0)) for f, level in finalized.items()
                if f != "kraft.version" and level > supported.get(f, 0)}
    if too_high:
        detail = ", ".join(f"{f} finalized at {lvl} but {release} goes up to {top}"
                           for f, (lvl, top) in too_high.items())
        raise RolloutError(f"Kafka {version} cannot join this cluster: {detail}; choose a release at least as new "
                           f"as the finalized features")


# ----- 2. deploy canary, 3. learner warm-up, 4. lead -----

def _deploy_canary(r: Rollout) -> dict:
    """Rolls each canary broker to the target with the canary marker, one at a time under the guard."""
    result: dict = {"canary_brokers": r.canary_ids()}
    with _watched(r, "deploy", result):
        result["rolled"] = _roll_fleet(r, r.canary_ids(), "canary", warm=False)
    r.state.update(status="canary deployed")
    return result


def _warm_up(r: Rollout) -> dict:
    """Waits until every canary broker is in the ISR of every partition it hosts (learner warm-up)."""
    waited = {str(b): round(_wait_in_isr(r, b, r.spec.warm_up_timeout), 1) for b in r.canary_ids()}
    return {"waited_s": waited}


def _lead(r: Rollout) -> dict:
    """Preferred leader election so canary brokers lead their preferred partitions of the probe topic and the
    lead_topics: canary partitions now exist."""
    canaries = set(r.canary_ids())
    topics = {PROBE_TOPIC, *r.spec.lead_topics}
    parts = [p for p in r.partitions() if p.topic in topics]
    missing_topics = sorted(topics - {p.topic for p in parts})
    if missing_topics:
        raise RolloutError(f"lead_topics {missing_topics} do not exist on the cluster")
    elected, off = _elect_until_led(r, lambda now: [p.name for p in now if p.topic in topics and p.replicas
                                                    and p.replicas[0] in canaries and p.leader != p.replicas[0]])
    canary_partitions = sorted(p.name for p in r.partitions() if p.topic in topics and p.leader in canaries)
    if not any(name.rpartition("-")[0] == PROBE_TOPIC for name in canary_partitions):
        raise RolloutError(f"no probe partition is led by a canary broker after 60s of preferred leader elections "
                           f"(still not led by their canary broker: {off[:5]})")
    return {"elected": elected, "not_led": off, "canary_partitions": canary_partitions}


# ----- 5./6./7. probe, interim gates, analysis, judge -----

def _aggregates(path: Path, config) -> tuple[Aggregates, int]:
    """A probe's observations file aggregated for the judge, and how many observations were usable; unusable
    records are excluded and counted per reason in the verdict, as the Spark job does (the one reader, shared
    with the health sweep)."""
    parsed, bad = read_file_counted(path)
    return Aggregates.from_observations(parsed, int(config.bucket_s * 1000), bad), len(parsed)


def _interim_look(r: Rollout, observations: Path, config) -> dict:
    agg, usable = _aggregates(observations, config)
    verdict = judge(agg, config, final=False)
    return {"verdict": verdict["verdict"], "reason": verdict["reason"], "observations": usable}


def _disturbances(r: Rollout, full: bool) -> list[str]:
    """What is wrong with the cluster right now beyond the canary being compared: brokers down (the deployer), and
    with `full` also brokers not registered and offline partitions (the cluster's metadata)."""
    brokers = r.deployer.brokers()
    problems = [f"broker {b.broker_id} down" for b in brokers if not b.running]
    if full:
        seen = health.check(r.bootstrap_servers, [b.broker_id for b in brokers], client_config=r.spec.client)
        if seen.error:
            problems.append(seen.error)
        missing = [b for b in seen.missing_brokers if f"broker {b} down" not in problems]
        if missing:
            problems.append(f"brokers {missing} not registered")
        if seen.offline_partitions:
            problems.append(f"{len(seen.offline_partitions)} offline partition(s)")
    return problems


def _probe_window(r: Rollout) -> dict:
    """Probe traffic for the window with interim looks every interval; a critical regression at a look stops
    the window early (fail fast) and decides ROLLBACK at once. The cluster is watched meanwhile (brokers down every
    second, registration and offline partitions at each look): a window in which it was disturbed cannot promote,
    whatever the lanes' comparison says (see _judge_window)."""
    spec = r.spec
    config = judge_settings(spec.judge_config)
    attempt = r.state.data["steps"]["probe-window"]["attempts"]
    cfg = _probe_config(r, f"window-{attempt}")
    observations = Path(cfg.observations_file)
    probe = Probe(cfg)
    start_ms = int(time.time() * 1000)
    started = time.monotonic()
    probe.start()
    r.audit.record(r.step, "probe started", probe_run_id=cfg.run_id, window_s=spec.window)
    interim: list[dict] = []
    stopped_early = None
    disturbed: list[str] = []  # each problem once, when first seen
    seen: set[str] = set()

    def watch(full: bool) -> None:
        at_s = time.monotonic() - started
        try:
            now = _disturbances(r, full)
        except Exception as exc:  # the cluster not answering is a disturbance too
            now = [f"the cluster did not answer ({exc})"]
        new = [p for p in now if p not in seen]
        if new:
            seen.update(new)
            disturbed.extend(f"at {at_s:.0f}s: {p}" for p in new)
            r.say("the cluster is disturbed during the window: %s", "; ".join(new))
            r.audit.record(r.step, "cluster disturbed", at_s=round(at_s, 1), problems=new)

    try:
        next_look = started + spec.interim_interval
        while time.monotonic() - started < spec.window:
            time.sleep(min(POLL, max(0.0, started + spec.window - time.monotonic())))
            watch(full=time.monotonic() >= next_look)
            if time.monotonic() >= next_look:
                next_look += spec.interim_interval
                look = _interim_look(r, observations, config)
                look["at_s"] = round(time.monotonic() - started, 1)
                interim.append(look)
                r.say("interim look at %.0fs: %s (%s)", look["at_s"], look["verdict"], look["reason"])
                r.audit.record(r.step, "interim look", **look)
                if look["verdict"] == ROLLBACK:
                    stopped_early = look
                    break
    finally:
        summary = probe.stop()
    window = {"attempt": attempt, "probe_run_id": cfg.run_id, "start_ms": start_ms, "end_ms": int(time.time() * 1000),
              "observations": str(observations), "stopped_early": stopped_early, "interim": interim,
              "disturbed": disturbed[:20],
              "probe": {lane: {k: t[k] for k in ("sent", "acked", "lost", "produce_errors")}
                        for lane, t in summary.lanes.items()}}
    r.state.update(window=window, verdict=None)
    if stopped_early:
        _record_verdict(r, {"verdict": ROLLBACK, "engine": "interim",
                            "reason": f"fail fast at the interim look after {stopped_early['at_s']}s: "
                                      f"{stopped_early['reason']}"})
    return {k: window[k] for k in ("probe_run_id", "start_ms", "end_ms", "probe", "disturbed")} | {
        "stopped_early": bool(stopped_early), "interim_looks": len(interim)}


def write_judge_config(config, path: Path) -> Path:
    """The judge config as the Spark job reads it back: YAML (YAML 1.1 would read JSON's 1e-07 as a string)."""
    path.write_text(yaml.safe_dump(config.to_dict(), sort_keys=False))
    return path


def analysis_request(r: Rollout) -> dict:
    """What the final analysis of the last probe window reads and writes: the arguments of
    spark_jobs/canary_analysis.py (the Airflow DAG hands them to SparkSubmitOperator)."""
    window = r.state.data.get("window")
    if not window:
        raise RolloutError("no probe window has run yet; run the probe-window step first")
    out = r.run_dir / f"analysis-{window['attempt']}"
    out.mkdir(parents=True, exist_ok=True)
    config_file = write_judge_config(judge_settings(r.spec.judge_config), out / "judge.yaml")
    # A secured cluster's credentials are not handed to Spark (its arguments land in XCom and on command lines):
    # the job reads the window's observations file instead, the same records the probe wrote to the topic.
    secured = r.spec.client.get("security.protocol", "plaintext").lower() != "plaintext"
    return {"observations": window["observations"] if secured else f"kafka://{r.bootstrap_servers}",
            "from_ms": window["start_ms"],
            "to_ms": window["end_ms"] + 1, "run_id": window["probe_run_id"], "out": str(out),
            "config": str(config_file)}


def _judge_window(r: Rollout) -> dict:
    """The verdict of the last probe window: the fail-fast one if it stopped early, else the final analysis's
    (a verdict.json the Spark job already wrote, else the Spark job run now, or the judge in-process with
    engine: inline). A failed analysis is INCONCLUSIVE, never PROMOTE."""
    window = r.state.data.get("window") or {}
    if window.get("stopped_early"):
        return r.state.data["verdict"]
    request = analysis_request(r)
    out = Path(request["out"])
    if r.spec.engine == "inline":
        verdict = _inline_verdict(Path(window["observations"]), out, judge_settings(r.spec.judge_config))
    else:
        verdict = _spark_verdict(r, request)
    if verdict["verdict"] == PROMOTE and window.get("disturbed"):
        # A broker that failed in the window hurt both lanes (every acks=all write waits for its replicas) and may
        # have failed because of the canary; lanes that look alike then prove nothing. A person decides.
        shown = "; ".join(window["disturbed"][:3]) + ("; …" if len(window["disturbed"]) > 3 else "")
        verdict = verdict | {"verdict": INCONCLUSIVE, "reason": f"the cluster was disturbed during the window "
                                                                 f"({shown}), so it cannot promote; the analysis "
                                                                 f"said PROMOTE: {verdict['reason']}"}
    return _record_verdict(r, verdict | {"analysis": str(out)})


def failure_verdict(r: Rollout, step_name: str, error: object) -> dict:
    """A step after the first change failed: the verdict is ROLLBACK, with that failure as its reason (the engine
    and the Airflow judge task both decide so)."""
    verdict = {"verdict": ROLLBACK, "reason": f"{step_name} failed: {error}", "engine": None}
    r.state.update(verdict=verdict, status="judged ROLLBACK")
    r.audit.record(step_name, "verdict", verdict=ROLLBACK, reason=verdict["reason"], engine=None)
    return verdict


def _record_verdict(r: Rollout, verdict: dict) -> dict:
    window = r.state.data["window"]
    result = {"verdict": verdict["verdict"], "reason": verdict["reason"], "engine": verdict.get("engine"),
              "probe_run_id": window["probe_run_id"], "window_ms": [window["start_ms"], window["end_ms"]],
              "stopped_early": bool(window["stopped_early"]), "interim_looks": len(window["interim"]),
              "probe": window["probe"], "analysis": verdict.get("analysis")}
    r.state.update(verdict=result, status=f"judged {result['verdict']}")
    r.audit.record(r.step, "verdict", verdict=result["verdict"], reason=result["reason"], engine=result["engine"])
    return result


def _spark_verdict(r: Rollout, request: dict) -> dict:
    from canary.judge.cli import run_analysis

    out = Path(request["out"])
    verdict_file = out / "verdict.json"
    code, failure = None, None
    if not verdict_file.exists():
        try:
            with open(out / "spark.log", "w") as spark_log:
                code = run_analysis(request["observations"], out, from_ms=request["from_ms"], to_ms=request["to_ms"],
                                    config=request["config"], run_id=request["run_id"], timeout=900, log=spark_log)
        except Exception as exc:  # it could not start (no spark-submit, the Kafka source not resolvable, …)
            failure = f"{type(exc).__name__}: {exc}"
    if failure or code == 2 or not verdict_file.exists():
        # A failed analysis never promotes: a person decides, or the rollout rolls back.
        return {"verdict": INCONCLUSIVE, "reason": f"the Spark analysis failed ({failure or f'exit {code}'}); see "
                                                   f"{out / 'spark.log'}", "engine": "spark"}
    verdict = json.loads(verdict_file.read_text())
    return {"verdict": verdict["verdict"], "reason": verdict["reason"], "engine": "spark"}


def _inline_verdict(observations: Path, out: Path, config) -> dict:
    verdict = judge(_aggregates(observations, config)[0], config, final=True)
    out.mkdir(parents=True, exist_ok=True)
    (out / "verdict.json").write_text(json.dumps(verdict, indent=2))
    return {"verdict": verdict["verdict"], "reason": verdict["reason"], "engine": "inline"}


# ----- 8. promote, rollback -----

def _promote(r: Rollout, approve: bool = False) -> dict:
    """Rolls the baseline brokers, then the canary brokers (dropping the marker), then the controllers to the
    target, one at a time under the guard, each back in the ISR before the next; finalizes when asked; probes."""
    verdict = (r.state.data.get("verdict") or {}).get("verdict")
    if verdict == ROLLBACK or (verdict != PROMOTE and not approve):
        raise RolloutError(f"the verdict is {verdict or 'not reached yet'}; promote needs PROMOTE "
                           f"(or, for INCONCLUSIVE, a person's approval: --approve)")
    canaries = r.canary_ids()
    order = [b.broker_id for b in r.deployer.brokers() if b.broker_id not in canaries] + canaries
    target = r.spec.change.version
    result: dict = {}
    with _watched(r, "promote", result):
        result["rolled"] = _roll_fleet(r, order, "promoted", warm=True)
        result["controllers"] = _roll_controllers(r, lambda c: target or c.version)
    result["finalized"] = _finalize(r, target) if target and r.spec.finalize else {}
    _restore_preferred(r)
    r.state.update(status="promoted")
    result["post_promotion_probe"] = _green_probe(r, "post-promotion")
    return result


def _roll_controllers(r: Rollout, version_of: Callable) -> list[int]:
    """Controllers last, one at a time, each back in the quorum before the next."""
    rolled = []
    for c in r.deployer.controllers():
        version = version_of(c)
        if c.version == version:
            continue
        r.say("rolling controller %s to %s", c.node_id, version)
        r.audit.record(r.step, "restart controller", controller=c.node_id, before=c.version, after=version)
        r.deployer.roll_controller(c.node_id, version=version)
        _wait(r, f"controller {c.node_id} back in the quorum", r.spec.warm_up_timeout, lambda: _quorum(r))
        rolled.append(c.node_id)
    return rolled


def _quorum(r: Rollout) -> str | None:
    seen = health.check(r.bootstrap_servers, [b.broker_id for b in r.deployer.brokers()], client_config=r.spec.client,
                        expected_voters=[c.node_id for c in r.deployer.controllers()])
    return None if seen.healthy else seen.reason()


def _finalize(r: Rollout, version: str) -> dict:
    levels = distribution.release_levels(distribution.release_of(version), distribution.ensure(
        max((version, distribution.TARGET_VERSION), key=distribution.parse_version)))
    wanted = {k: v for k, v in levels.items() if k not in features.NOT_BY_DEFAULT and v > 0}
    changes = features.finalize(r.bootstrap_servers, wanted, client_config=kafka_python_settings(r.spec.client))
    if changes:
        r.audit.record("promote", "finalize", changes={k: list(v) for k, v in changes.items()})
    return {k: list(v) for k, v in changes.items()}


def _raised_features(r: Rollout) -> dict[str, list[int]]:
    now = features.describe(r.bootstrap_servers, kafka_python_settings(r.spec.client)).finalized
    before = r.state.before["features"]
    return {f: [before.get(f, 0), level] for f, level in now.items() if level > before.get(f, 0)}


def _rollback(r: Rollout) -> dict:
    """Brings every changed broker back to its pre-rollout version, config and rack (canaries first), under the
    guard and warm-up; restores preferred leaders. Refused once features were finalized."""
    if r.state.before is None:
        raise RolloutError("nothing to roll back: preflight never recorded the pre-rollout state")
    raised = _raised_features(r)
    if raised:
        detail = ", ".join(f"{f} {a}→{b}" for f, (a, b) in raised.items())
        raise RolloutError(f"refusing to roll back: feature levels were finalized ({detail}) and finalized levels "
                           f"cannot go down, so brokers on the old version would not start; roll forward instead")
    canaries = r.canary_ids()
    order = canaries + [b.broker_id for b in r.deployer.brokers() if b.broker_id not in canaries]
    before = r.state.before["controllers"]
    result: dict = {}
    with _watched(r, "rollback", result):
        result["rolled"] = _roll_fleet(r, order, "baseline", warm=True)
        result["controllers"] = _roll_controllers(r, lambda c: before[str(c.node_id)]["version"])
    result["elected"] = _restore_preferred(r)
    r.state.update(status="rolled_back")
    return result


# ----- 9. verify -----

def _verify(r: Rollout) -> dict:
    """Checks the promised state: after a rollback the cluster equals the snapshot (versions, configs, racks,
    finalized features, leaders); after a promotion every broker runs the change; either way every broker and
    controller runs and the quorum is caught up. Then a green probe; then the lock is released."""
    status = r.state.status
    if status not in ("promoted", "rolled_back"):
        raise RolloutError(f"nothing to verify yet: the rollout is at '{status}'; promote or roll back first")
    before = r.state.before
    differences = []
    for b in r.deployer.brokers():
        want = _want(r, b.broker_id, "baseline" if status == "rolled_back" else "promoted")
        if not _is(b, want):
            differences.append(f"broker {b.broker_id} is {b.to_dict()}, expected {want}")
    target = r.spec.change.version
    for c in r.deployer.controllers():
        want_version = before["controllers"][str(c.node_id)]["version"] if status == "rolled_back" or not target \
            else target
        if c.version != want_version:
            differences.append(f"controller {c.node_id} runs {c.version}, expected {want_version}")
    finalized = features.describe(r.bootstrap_servers, kafka_python_settings(r.spec.client)).finalized
    if status == "rolled_back" and finalized != before["features"]:
        differences.append(f"finalized features are {finalized}, before the rollout {before['features']}")
    if status == "rolled_back":
        with contextlib.suppress(RolloutError):  # leaders settle a moment after the elections
            _wait(r, "leaders as before", 60, lambda: "; ".join(_leader_diff(before["leaders"], _leaders(r))) or None)
        differences += _leader_diff(before["leaders"], _leaders(r))
    # Every controller running and caught up with the quorum, as preflight found them (a controller that crashed
    # during the rollout leaves the quorum one failure from unavailable, whatever the brokers look like).
    differences += [f"controller {c.node_id} is not running" for c in r.deployer.controllers() if not c.running]
    with contextlib.suppress(RolloutError):  # a controller started a moment ago catches up
        _wait(r, "controllers caught up with the quorum", 60, lambda: _quorum(r))
    seen = health.check(r.bootstrap_servers, [b.broker_id for b in r.deployer.brokers()], client_config=r.spec.client,
                        expected_voters=[c.node_id for c in r.deployer.controllers()])
    if not seen.healthy:
        differences.append(f"cluster not healthy: {seen.reason()}")
    if differences:
        r.audit.record("verify", "differences", differences=differences)
        raise RolloutError("verify failed, the lock stays held until this is fixed: " + "; ".join(differences))
    probe = _green_probe(r, "verify")
    released = r.lock.release(r.run_id)
    r.audit.record("verify", "lock released" if released else "lock was not held")
    r.state.update(status=f"verified {status}")
    return {"status": status, "finalized": finalized, "probe": probe, "lock_released": released}


def _leader_diff(before: dict, now: dict) -> list[str]:
    """Partitions that were on their preferred leader before and are not on the same leader now."""
    return [f"{name} led by {now.get(name, {}).get('leader')}, before by {p['leader']}"
            for name, p in sorted(before.items())
            if p["leader"] == p["preferred"] and now.get(name, {}).get("leader") != p["leader"]]


preflight = run_step("preflight", _preflight)
deploy_canary = run_step("deploy-canary", _deploy_canary)
warm_up = run_step("warm-up", _warm_up)
lead = run_step("lead", _lead)
probe_window = run_step("probe-window", _probe_window)
judge_window = run_step("judge", _judge_window)


def gate(r: Rollout) -> dict:
    """probe-window then judge: the verdict of this rollout."""
    probe_window(r)
    return judge_window(r)
rollback = run_step("rollback", _rollback)
verify = run_step("verify", _verify)


def promote(r: Rollout, approve: bool = False) -> dict:
    return run_step("promote", lambda rr: _promote(rr, approve))(r)
