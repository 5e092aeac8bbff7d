"""The client rollout (DESIGN.md §3, "client rollouts follow the same shape"): a new version of a producer/consumer
service goes first to canary instances that only touch canary partitions, the lanes are compared, and the version is
promoted to every instance or rolled back. Each step reads the real state (cluster, instances), converges, records
every action in the audit log and returns a small JSON-able result; re-running a step does only what is missing.

    rollout = ClientRollout(load_client_spec("client-rollout.yaml"))
    run_client_rollout(rollout)       # or step by step:
    preflight(r); open_lane(r); deploy_canary(r); window(r); judge_window(r)
    promote(r) if PROMOTE else rollback(r); verify(r)

Order, and why:
- open-lane before deploy-canary: canary producers start only once canary partitions exist, so not one of their
  records falls back onto baseline partitions (KIP fallback is availability first; a rollout need not use it).
- promote: baseline instances to the new version one at a time, then close the lane (the canary consumers hand the
  canary partitions back at their commits), then stop the canary instances.
- rollback: canary producers stop first (a bad producer must not fall back onto baseline partitions once the lane
  closes), canary consumers drain what the canary producers wrote (committed offsets reach the end of the canary
  partitions, so baseline consumers never receive a record of the bad version), the lane closes (baseline
  consumers take the partitions over at the committed offsets), then the canary consumers stop.

Run state, audit log, report and the cluster lock are the broker rollout's (canary.rollout.run/audit/report/lock):
one rollout per cluster, broker or client.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
import uuid
from pathlib import Path

from confluent_kafka import Consumer, KafkaException
from confluent_kafka import TopicPartition as TP

from canary import lanes
from canary.clients.deployer import Instance, ServiceDeployer
from canary.errors import CanaryError
from canary.judge import INCONCLUSIVE, PROMOTE, ROLLBACK, judge
from canary.kafka import health
from canary.kafka.admin import TopicAdmin, TopicState
from canary.kafka.clients import QUIET_LOGGER
from canary.observations import OBSERVATIONS_TOPIC
from canary.rollout import lane as lane_plan
from canary.rollout.deployer import Deployer
from canary.rollout.engine import EXIT, _result
from canary.rollout.guard import PartitionView
from canary.rollout.report import write_report
from canary.rollout.steps import (
    POLL,
    RolloutError,
    RolloutRun,
    _aggregates,
    _elect_until_led,
    _inline_verdict,
    _spark_verdict,
    _wait,
    describe,
    failure_verdict,
    run_step,
    write_judge_config,
)

log = logging.getLogger("canary.rollout")
__all__ = ["EXIT", "ClientRollout", "run_client_rollout"]


class ClientRollout(RolloutRun):
    """One client rollout: a rollout run (spec, broker deployer to reach the cluster, run directory, lock) with the
    service deployer of its fleet."""

    LOG_PREFIX = "client "

    def __init__(self, spec, run_dir: str | Path | None = None, deployer: Deployer | None = None,
                 services: ServiceDeployer | None = None, tie_to_parent: bool = False):
        super().__init__(spec, run_dir, deployer)
        svc = spec.service
        self.services = services or ServiceDeployer(
            svc.dir, self.bootstrap_servers, topic=svc.topic, group=svc.group, client=spec.client, rate=svc.rate,
            run_id=svc.observations_run_id, stop_timeout=spec.stop_timeout, tie_to_parent=tie_to_parent)

    @property
    def topic(self) -> str:
        return self.spec.service.topic

    def observe(self) -> TopicState:
        return TopicAdmin(self.bootstrap_servers, self.spec.client).observe(self.topic)

    def partitions(self) -> list[PartitionView]:
        """The service topic's partitions (what the broker rollout's election helpers select from)."""
        return [PartitionView(self.topic, p, s.replicas, s.isr, s.leader, 1)
                for p, s in sorted(self.observe().partitions.items())]


# ----- the fleet -----

def fleet(spec, version: str, lane: str = "baseline") -> list[Instance]:
    """The instances of one lane: the baseline's as the spec counts them, the canary lane's one producer (if the
    service has producers) and one consumer (if it has consumers), named with the client marker."""
    svc = spec.service
    producers, consumers = (svc.producers, svc.consumers) if lane == "baseline" else (
        min(svc.producers, 1), min(svc.consumers, 1))

    def name(role: str, i: int) -> str:
        base = f"{svc.name}-{role}-{i}"
        return lanes.canary_client_id(base) if lane == "canary" else base
    return ([Instance(name("producer", i), "producer", lane, version) for i in range(producers)]  # type: ignore[arg-type]
            + [Instance(name("consumer", i), "consumer", lane, version, i, consumers)  # type: ignore[arg-type]
               for i in range(consumers)])


def _not_as_wanted(r: ClientRollout, wanted: list[Instance]) -> list[str]:
    known = {s.instance.name: s for s in r.services.instances()}
    problems = []
    for inst in wanted:
        s = known.get(inst.name)
        if s is None or not s.running:
            problems.append(f"{inst.name} is not running")
        elif s.instance != inst:
            problems.append(f"{inst.name} runs {s.instance.version} in the {s.instance.lane} lane, expected "
                            f"{inst.version} in the {inst.lane} lane")
    return problems


def _converge(r: ClientRollout, wanted: list[Instance]) -> list[str]:
    """Every instance of `wanted` running as wanted, one at a time; returns the ones (re)started."""
    changed = []
    for inst in wanted:
        before = r.services.status(inst.name)
        if r.services.start(inst):
            r.audit.record(r.step, "start instance", instance=inst.name, role=inst.role, lane=inst.lane,
                           version=inst.version, was=before.to_dict() if before else None)
            r.say("%s %s started on %s (%s lane)", inst.role, inst.name, inst.version, inst.lane)
            changed.append(inst.name)
    return changed


def _remove(r: ClientRollout, wanted: list[Instance]) -> list[str]:
    """Stops and forgets `wanted` (SIGTERM: a consumer commits, a producer flushes)."""
    stopped = []
    for inst in wanted:
        if r.services.status(inst.name) is not None:
            was_running = r.services.stop(inst.name)
            r.services.forget(inst.name)
            r.audit.record(r.step, "stop instance", instance=inst.name, role=inst.role, was_running=was_running)
            stopped.append(inst.name)
    return stopped


# ----- the lane -----

def _canary_brokers(state: TopicState) -> list[int]:
    return sorted(b for b, rack in state.brokers.items() if lanes.broker_lane(rack) == "canary")


def _replicas(state: TopicState) -> dict[int, list[int]]:
    return {p: list(s.replicas) for p, s in sorted(state.partitions.items())}


def _move(r: ClientRollout, targets: dict[int, list[int]], action: str) -> list[str]:
    """Reorders replica lists to `targets` (same replica sets: no data moves), waits until the metadata shows
    them, then elects preferred leaders until the first replica leads every partition of `targets`. Returns the
    partitions still not led by their first replica (empty when done)."""
    state = r.observe()
    todo = {p: reps for p, reps in targets.items() if list(state.partitions[p].replicas) != reps}
    if todo:
        r.audit.record(r.step, action, topic=r.topic, reassign={str(p): v for p, v in todo.items()},
                       was={str(p): list(state.partitions[p].replicas) for p in todo})
        TopicAdmin(r.bootstrap_servers, r.spec.client).reassign(r.topic, todo)

    def shown() -> str | None:
        now = r.observe()
        off = [p for p, reps in targets.items() if list(now.partitions[p].replicas) != reps or p in now.reassigning]
        return f"replica order of partitions {off} not updated yet" if off else None
    _wait(r, f"{action} on {r.topic}", r.spec.lane_timeout, shown)
    names = {f"{r.topic}-{p}" for p in targets}
    _, off = _elect_until_led(r, lambda parts: [p.name for p in parts if p.name in names and p.replicas
                                                 and p.leader != p.replicas[0]], timeout=r.spec.lane_timeout)
    return off


def _lane_now(r: ClientRollout) -> list[int]:
    state = r.observe()
    canaries = set(r.state.before["canary_brokers"]) if r.state.before else set(_canary_brokers(state))
    return lane_plan.canary_partitions({p: s.leader for p, s in state.partitions.items()}, canaries)


def _close_lane(r: ClientRollout) -> dict:
    before = r.state.before
    original = {int(p): reps for p, reps in before["replicas"].items()}
    opened = [int(p) for p in before["lane"]]
    targets = {p: original[p] for p in opened} | lane_plan.plan_restore(original, _replicas(r.observe()))
    off = _move(r, targets, "close lane")
    left = _lane_now(r)
    if left:
        raise RolloutError(f"the canary lane of {r.topic} did not close: partitions {left} are still led by a canary "
                           f"broker (not led by their first replica: {off}); run the step again")
    r.audit.record(r.step, "lane closed", topic=r.topic, partitions=opened)
    return {"closed": opened}


# ----- 1. preflight -----

def _preflight(r: ClientRollout) -> dict:
    """Checks everything before any change: brokers running and the cluster healthy, the service topic exists with
    no reassignment in flight and no canary partition yet, a canary broker hosts replicas of it (the lane plan),
    every baseline instance runs on the `from` version; takes the lock; records the pre-rollout state."""
    spec = r.spec
    brokers = r.deployer.brokers()
    down = [b.broker_id for b in brokers if not b.running]
    if down:
        raise RolloutError(f"brokers {down} are not running; start them before a rollout")
    seen = health.check(r.bootstrap_servers, [b.broker_id for b in brokers], client_config=spec.client,
                        expected_voters=[c.node_id for c in r.deployer.controllers()])
    if not seen.healthy:
        raise RolloutError(f"the cluster is not healthy: {seen.reason()}; fix it before a rollout")
    state = r.observe()
    if not state.exists:
        raise RolloutError(f"the service topic {r.topic} does not exist; create it (or fix service.topic)")
    if state.reassigning:
        raise RolloutError(f"partitions {sorted(state.reassigning)} of {r.topic} are being reassigned; wait for it")
    canaries = _canary_brokers(state)
    if r.state.before is None:
        existing = lane_plan.canary_partitions({p: s.leader for p, s in state.partitions.items()}, canaries)
        if existing:
            raise RolloutError(f"{r.topic} already has canary partitions {existing} (led by canary broker(s) "
                               f"{canaries}); canary partitions of a service topic exist only during a client "
                               f"rollout: move their leadership to baseline brokers (reorder the replicas so a "
                               f"baseline broker is first, then a preferred leader election)")
        plan = lane_plan.plan_open(_replicas(state), canaries, spec.canary_partitions, r.topic)
    else:
        plan = {int(p): v for p, v in r.state.before["lane"].items()}
    baseline = fleet(spec, spec.from_version)
    wrong = _not_as_wanted(r, baseline)
    if wrong and r.state.before is None:
        raise RolloutError(f"the baseline fleet is not running on {spec.from_version}: {'; '.join(wrong)}; start it "
                           f"with `kafka-canary client-rollout baseline --spec FILE`")
    taken = r.lock.acquire(r.run_id, len(brokers))
    r.audit.record("preflight", "lock taken" if taken else "lock already held by this rollout")
    if r.state.before is None:
        before = {"taken_ms": int(time.time() * 1000), "topic": r.topic, "canary_brokers": canaries,
                  "replicas": {str(p): v for p, v in _replicas(state).items()},
                  "lane": {str(p): v for p, v in plan.items()},
                  "instances": [s.to_dict() for s in r.services.instances()]}
        r.state.update(before=before, canary_brokers=canaries, status="preflight")
        r.audit.record("preflight", "snapshot", before=before)
    return {"canary_brokers": canaries, "lane_plan": {str(p): v for p, v in plan.items()},
            "baseline": [i.name for i in baseline]}


# ----- 2. open lane, 3. deploy canary -----

def _open_lane(r: ClientRollout) -> dict:
    """Puts a canary broker first in the replica lists of the planned partitions and elects it leader: those are
    the canary partitions of the rollout. Baseline consumers let go of them at their commits."""
    plan = {int(p): v for p, v in r.state.before["lane"].items()}
    off = _move(r, plan, "open lane")
    opened = _lane_now(r)
    if sorted(plan) != opened:
        raise RolloutError(f"the canary lane did not open as planned: canary partitions are {opened}, planned "
                           f"{sorted(plan)} (not led by their canary broker: {off})")
    r.state.update(status="lane open")
    r.audit.record(r.step, "lane open", topic=r.topic, partitions=opened)
    return {"canary_partitions": opened}


def _deploy_canary(r: ClientRollout) -> dict:
    """Starts the canary instances on the target version: consumers first, then producers (the lane is open, so
    their records go to canary partitions only)."""
    if not _lane_now(r):
        raise RolloutError(f"{r.topic} has no canary partition: the lane is not open; run open-lane first")
    canary = fleet(r.spec, r.spec.to_version, "canary")
    started = _converge(r, [i for i in canary if i.role == "consumer"])
    started += _converge(r, [i for i in canary if i.role == "producer"])
    r.state.update(status="canary deployed")
    return {"started": started, "canary": [i.name for i in canary]}


# ----- 4. window, 5. judge -----

def fetch_observations(bootstrap: str, client: dict[str, str], run_id: str, from_ms: int, to_ms: int, path: Path,
                       timeout: float = 60.0) -> int:
    """Copies the observations of `run_id` whose send time is in [from_ms, to_ms) from the observations topic into
    `path` (JSON lines); returns how many. Reads from a minute before `from_ms` (by record time) up to the end
    offsets seen at the start."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"kafka-canary-client-judge-{uuid.uuid4().hex}",
                         "enable.auto.commit": False, "logger": QUIET_LOGGER, **client})
    written = 0
    key = run_id.encode()
    try:
        meta = consumer.list_topics(OBSERVATIONS_TOPIC, timeout=15).topics.get(OBSERVATIONS_TOPIC)
        parts = sorted(meta.partitions) if meta is not None and meta.error is None else []
        starts = consumer.offsets_for_times([TP(OBSERVATIONS_TOPIC, p, from_ms - 60_000) for p in parts], timeout=15)
        ends = {p: consumer.get_watermark_offsets(TP(OBSERVATIONS_TOPIC, p), timeout=15)[1] for p in parts}
        todo = {tp.partition: tp.offset for tp in starts if 0 <= tp.offset < ends[tp.partition]}
        consumer.assign([TP(OBSERVATIONS_TOPIC, p, o) for p, o in todo.items()])
        deadline = time.monotonic() + timeout
        with open(path, "w") as out:
            while todo and time.monotonic() < deadline:
                msg = consumer.poll(0.5)
                if msg is None or msg.error() is not None:
                    continue
                if msg.offset() + 1 >= ends[msg.partition()]:
                    todo.pop(msg.partition(), None)
                if msg.key() != key:
                    continue
                try:
                    send_ts = json.loads(msg.value())["send_ts"]
                except (ValueError, KeyError, TypeError):
                    send_ts = from_ms  # kept: the reader counts it as malformed
                if from_ms <= send_ts < to_ms:
                    out.write(msg.value().decode(errors="replace") + "\n")
                    written += 1
    except KafkaException as exc:
        raise RolloutError(f"reading observations from {OBSERVATIONS_TOPIC} failed: {exc.args[0].str()}") from exc
    finally:
        consumer.close()
    return written


def _look(r: ClientRollout, start_ms: int, end_ms: int, name: str, final: bool) -> tuple[dict, Path]:
    config = r.spec.judge()
    path = r.run_dir / f"observations-{name}.jsonl"
    count = fetch_observations(r.bootstrap_servers, r.spec.client, r.spec.service.observations_run_id, start_ms,
                               end_ms, path)
    agg, usable = _aggregates(path, config)
    verdict = judge(agg, config, final=final)
    return {"verdict": verdict["verdict"], "reason": verdict["reason"], "observations": count,
            "usable": usable}, path


def _window(r: ClientRollout) -> dict:
    """Lets traffic flow through both lanes for the window, with interim looks (fail fast on a critical
    regression) and a watch on the canary instances (one that exits decides ROLLBACK at once)."""
    spec = r.spec
    attempt = r.state.data["steps"]["window"]["attempts"]
    canary = fleet(spec, spec.to_version, "canary")
    start_ms, started = int(time.time() * 1000), time.monotonic()
    r.audit.record(r.step, "window started", window_s=spec.window)
    interim: list[dict] = []
    stopped_early = None
    next_look = started + spec.interim_interval
    while time.monotonic() - started < spec.window:
        time.sleep(min(POLL, max(0.0, started + spec.window - time.monotonic())))
        gone = [i.name for i in canary if not (s := r.services.status(i.name)) or not s.running]
        if gone:
            stopped_early = {"verdict": ROLLBACK, "reason": f"canary instance(s) {gone} exited during the window "
                                                            f"(see their logs in {r.services.directory})",
                             "at_s": round(time.monotonic() - started, 1)}
            break
        if time.monotonic() >= next_look and time.monotonic() - started < spec.window - 1:
            next_look += spec.interim_interval
            look, _ = _look(r, start_ms, int(time.time() * 1000), f"interim-{attempt}", final=False)
            look["at_s"] = round(time.monotonic() - started, 1)
            interim.append(look)
            r.say("interim look at %.0fs: %s (%s)", look["at_s"], look["verdict"], look["reason"])
            r.audit.record(r.step, "interim look", **look)
            if look["verdict"] == ROLLBACK:
                stopped_early = look
                break
    window = {"attempt": attempt, "start_ms": start_ms, "end_ms": int(time.time() * 1000),
              "stopped_early": stopped_early, "interim": interim}
    r.state.update(window=window, verdict=None)
    if stopped_early:
        _record_verdict(r, {"verdict": ROLLBACK, "engine": "interim",
                            "reason": f"fail fast after {stopped_early['at_s']}s: {stopped_early['reason']}"})
    return {"start_ms": start_ms, "end_ms": window["end_ms"], "stopped_early": bool(stopped_early),
            "interim_looks": len(interim)}


def _judge_window(r: ClientRollout) -> dict:
    """The verdict of the window: the fail-fast one if it stopped early, else the analysis of the window's
    observations (the Spark job, or the judge in-process with engine: inline). A failed analysis is INCONCLUSIVE."""
    window = r.state.data.get("window")
    if not window:
        raise RolloutError("no window has run yet; run the window step first")
    if window.get("stopped_early"):
        return r.state.data["verdict"]
    time.sleep(3.0)  # records sent at the window's end are processed, and their observations flushed, a moment later
    out = r.run_dir / f"analysis-{window['attempt']}"
    out.mkdir(parents=True, exist_ok=True)
    config = r.spec.judge()
    observations = r.run_dir / f"observations-window-{window['attempt']}.jsonl"
    count = fetch_observations(r.bootstrap_servers, r.spec.client, r.spec.service.observations_run_id,
                               window["start_ms"], window["end_ms"], observations)
    r.audit.record(r.step, "observations read", count=count, file=str(observations))
    if r.spec.engine == "inline":
        verdict = _inline_verdict(observations, out, config)
    else:
        secured = r.spec.client.get("security.protocol", "plaintext").lower() != "plaintext"
        request = {"observations": str(observations) if secured else f"kafka://{r.bootstrap_servers}",
                   "from_ms": window["start_ms"], "to_ms": window["end_ms"],
                   "run_id": r.spec.service.observations_run_id, "out": str(out),
                   "config": str(write_judge_config(config, out / "judge.yaml"))}
        verdict = _spark_verdict(r, request)
    return _record_verdict(r, verdict | {"analysis": str(out), "observations": count})


def _record_verdict(r: ClientRollout, verdict: dict) -> dict:
    window = r.state.data["window"]
    result = {"verdict": verdict["verdict"], "reason": verdict["reason"], "engine": verdict.get("engine"),
              "window_ms": [window["start_ms"], window["end_ms"]], "stopped_early": bool(window["stopped_early"]),
              "interim_looks": len(window["interim"]), "observations": verdict.get("observations"),
              "analysis": verdict.get("analysis")}
    r.state.update(verdict=result, status=f"judged {result['verdict']}")
    r.audit.record(r.step, "verdict", verdict=result["verdict"], reason=result["reason"], engine=result["engine"])
    return result


# ----- 6. promote, rollback -----

def _promote(r: ClientRollout, approve: bool = False) -> dict:
    """Baseline instances to the target version one at a time, then the lane closes, then the canary instances
    stop (their consumers commit; the baseline takes the canary partitions over at those commits)."""
    verdict = (r.state.data.get("verdict") or {}).get("verdict")
    if verdict == ROLLBACK or (verdict != PROMOTE and not approve):
        raise RolloutError(f"the verdict is {verdict or 'not reached yet'}; promote needs PROMOTE "
                           f"(or, for INCONCLUSIVE, a person's approval: --approve)")
    rolled = _converge(r, fleet(r.spec, r.spec.to_version))
    closed = _close_lane(r)
    canary = fleet(r.spec, r.spec.to_version, "canary")
    stopped = _remove(r, [i for i in canary if i.role == "producer"]) + _remove(
        r, [i for i in canary if i.role == "consumer"])
    r.state.update(status="promoted")
    return {"rolled": rolled, **closed, "stopped": stopped}


def _drain(r: ClientRollout, partitions: list[int]) -> dict:
    """Waits until the group's committed offsets reach the end of `partitions` (the canary consumers processed
    everything the canary producers wrote). Returns the records still not committed per partition."""
    consumer = Consumer({"bootstrap.servers": r.bootstrap_servers, "group.id": r.spec.service.group,
                         "enable.auto.commit": False, "logger": QUIET_LOGGER, **r.spec.client})
    left: dict[int, int] = {}
    try:
        def check() -> str | None:
            committed = consumer.committed([TP(r.topic, p) for p in partitions], timeout=10)
            left.clear()
            for tp in committed:
                high = consumer.get_watermark_offsets(TP(r.topic, tp.partition), timeout=10, cached=False)[1]
                behind = high - max(tp.offset, 0)
                if behind > 0:
                    left[tp.partition] = behind
            return f"records not yet committed: {left}" if left else None
        with contextlib.suppress(RolloutError):
            _wait(r, "canary consumers draining the canary partitions", r.spec.drain_timeout, check)
    finally:
        consumer.close()
    return dict(left)


def _rollback(r: ClientRollout) -> dict:
    """Canary producers stop, canary consumers drain the canary partitions, the lane closes, the canary consumers
    stop, and any baseline instance not on the `from` version goes back to it."""
    if r.state.before is None:
        raise RolloutError("nothing to roll back: preflight never recorded the pre-rollout state")
    canary = fleet(r.spec, r.spec.to_version, "canary")
    result: dict = {"stopped": _remove(r, [i for i in canary if i.role == "producer"])}
    opened = _lane_now(r)
    if opened and any(i.role == "consumer" and (s := r.services.status(i.name)) and s.running for i in canary):
        left = _drain(r, opened)
        r.audit.record(r.step, "drained" if not left else "drain incomplete", partitions=opened, left=left)
        if left:
            r.say("canary partitions %s not drained after %.0fs: %s records go to the baseline consumers", opened,
                  r.spec.drain_timeout, sum(left.values()))
        result["drain_left"] = left
    result.update(_close_lane(r))
    result["stopped"] += _remove(r, [i for i in canary if i.role == "consumer"])
    result["rolled"] = _converge(r, fleet(r.spec, r.spec.from_version))
    r.state.update(status="rolled_back")
    return result


# ----- 7. verify -----

def _verify(r: ClientRollout) -> dict:
    """Checks the promised state: every baseline instance running on its promised version (the target after a
    promotion, `from` after a rollback), no canary instance left, the original replica order back, no canary
    partition. Then releases the lock."""
    status = r.state.status
    if status not in ("promoted", "rolled_back"):
        raise RolloutError(f"nothing to verify yet: the rollout is at '{status}'; promote or roll back first")
    version = r.spec.to_version if status == "promoted" else r.spec.from_version
    differences = _not_as_wanted(r, fleet(r.spec, version))
    differences += [f"canary instance {s.instance.name} is still {'running' if s.running else 'known'}"
                    for s in r.services.instances() if s.instance.lane == "canary"]
    original = {int(p): reps for p, reps in r.state.before["replicas"].items()}
    now = _replicas(r.observe())
    differences += [f"{r.topic}-{p} has replicas {now.get(p)}, before {reps}"
                    for p, reps in lane_plan.plan_restore(original, now).items()]
    with contextlib.suppress(RolloutError):
        _wait(r, "no canary partition", 30, lambda: f"canary partitions {left}" if (left := _lane_now(r)) else None)
    left = _lane_now(r)
    if left:
        differences.append(f"canary partitions {left} of {r.topic} are still led by a canary broker")
    if differences:
        r.audit.record("verify", "differences", differences=differences)
        raise RolloutError("verify failed, the lock stays held until this is fixed: " + "; ".join(differences))
    released = r.lock.release(r.run_id)
    r.audit.record("verify", "lock released" if released else "lock was not held")
    r.state.update(status=f"verified {status}")
    return {"status": status, "version": version, "lock_released": released}


preflight = run_step("preflight", _preflight)
open_lane = run_step("open-lane", _open_lane)
deploy_canary = run_step("deploy-canary", _deploy_canary)
window = run_step("window", _window)
judge_window = run_step("judge", _judge_window)
rollback = run_step("rollback", _rollback)
verify = run_step("verify", _verify)


def promote(r: ClientRollout, approve: bool = False) -> dict:
    return run_step("promote", lambda rr: _promote(rr, approve))(r)


STEPS = (("preflight", preflight), ("open-lane", open_lane), ("deploy-canary", deploy_canary), ("window", window),
         ("judge", judge_window))


def run_client_rollout(r: ClientRollout, approve: bool = False, on_inconclusive: str = "rollback") -> dict:
    """Runs every step still to do, as the broker rollout's engine does: the verdict decides promote or rollback, a
    failure after the first change rolls back. Returns {"outcome", "status", "verdict", "reason", "report", …}."""
    state = r.state
    if state.status.startswith("verified"):
        return _result(r, "the rollout had already finished")
    try:
        for name, step in STEPS:
            if state.step_done(name) or (name == "judge" and (state.data.get("window") or {}).get("stopped_early")):
                continue
            try:
                step(r)
            except Exception as exc:  # once something changed, the way back is safe
                if name == "preflight" or not state.before:
                    raise
                r.say("%s failed (%s); rolling back", name, describe(exc))
                failure_verdict(r, name, describe(exc))
                break
        verdict = state.data["verdict"]["verdict"]
        if not state.status.startswith(("promoted", "rolled_back")):
            if verdict == PROMOTE or (verdict == INCONCLUSIVE and approve):
                promote(r, approve=approve)
            elif verdict == INCONCLUSIVE and on_inconclusive == "stop":
                return _result(r, "a person must decide: `kafka-canary client-rollout promote --approve` or "
                                  "`kafka-canary client-rollout rollback`, then `verify`")
            else:
                rollback(r)
        verify(r)
        return _result(r, "")
    finally:
        with contextlib.suppress(CanaryError, OSError):
            write_report(state, r.audit)
