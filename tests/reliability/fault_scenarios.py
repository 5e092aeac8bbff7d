"""Fault scenarios of the broker rollout on real brokers (issue 8, the fault suite).

Each scenario runs a real rollout on a real cluster (3 brokers, 3 controllers), injects one fault at a chosen
moment, lets the rollout (or its retry) finish, and returns what happened as data, a `Result`:

- the outcome: the rollout's final status (`verified rolled_back`, `verified promoted`, or refused before any
  change) and the verdict;
- acknowledged messages lost, two ways: the rollout's own probe observations (every observation of an
  acknowledged message must be a receipt, and each probe's file must account for every message its summary says
  was acknowledged) and an independent produce-consume-validate stream (`Validator`: acks=all writes to a topic
  of its own for the whole scenario, every acknowledged offset read back at the end, as Kafka's own
  ProduceConsumeValidate system tests do) that also covers the traffic of a rollout process that was killed;
- the safe-roll guard seen from outside (`Watch`): no live broker restarted while another broker's process was
  down, and no restart after the guard refused it (the audit log);
- broker JVM starts per broker, counted from the outside (pids), against what the change needs;
- the time from the fault to the safe state.

tests/reliability/test_fault_suite.py asserts on the results; bench/fault_bench.py prints them as the fault table.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from unittest import mock

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from kafka.admin import KafkaAdminClient

from canary import process
from canary.cluster.local import LocalCluster
from canary.cluster.state import ClusterState
from canary.judge.config import DEFAULT_METRICS
from canary.kafka.admin import TopicAdmin
from canary.kafka.clients import PRODUCER_DEFAULTS, QUIET_LOGGER, admin_client
from canary.observations import BROKER_KIND
from canary.outcome import Outcome
from canary.rollout import guard
from canary.rollout.broker import BROKER, Rollout
from canary.rollout.broker.spec import load_spec
from canary.rollout.core import RunSummary, run_all
from canary.rollout.core.lock import ClusterLock

VALIDATE_TOPIC = "fault-suite-validate"
# The judge of a short window on a busy 2-core machine (as the rollout integration tests): the first 15 s after
# the canary starts leading are not judged, latency floors of tens of ms, no e2e p99 SLO, and enough samples for
# one canary partition at 50 msg/s in the 15 judged seconds.
_LATENCY = {"rel_floor": 0.5, "abs_floor": 40.0, "min_samples": 300}
JUDGE = {"warmup_s": 15, "bucket_s": 5, "min_buckets": 2, "metrics": {
    **{m: {"min_samples": 300} for m in ("produce_error_rate", "consume_error_rate", "loss_rate", "duplicate_rate",
                                         "out_of_order_rate", "availability", "throughput")},
    **{m: dict(_LATENCY) for m in ("e2e_latency_p50", "e2e_latency_p95", "produce_latency_p99")},
    "e2e_latency_p99": _LATENCY | {"slo": None}}}
# For the scenarios about promote: the change is harmless and the scenario is about what happens after the gate, so
# the gate looks only at lost messages (a busy machine's latency swings would otherwise decide the path).
PROMOTING_JUDGE = {"warmup_s": 15, "bucket_s": 5, "min_buckets": 2, "metrics": {
    **{m.name: {"enabled": False} for m in DEFAULT_METRICS if m.name != "loss_rate"},
    "loss_rate": {"min_samples": 300}}}
STEP_ORDER = ("preflight", "deploy-canary", "warm-up", "lead", "probe-window", "judge", "promote", "rollback",
              "verify")


def spec_raw(cluster: LocalCluster, run_id: str, io_threads: int, **overrides) -> dict:
    """A good canary (num.io.threads changed: a real restart, harmless), short windows, the inline judge. Each
    scenario changes num.io.threads to its own value, so scenarios can share one cluster whatever the last one
    promoted."""
    raw = {"cluster": {"dir": str(cluster.directory)}, "change": {"config": {"num.io.threads": str(io_threads)}},
           "canary": {"count": 1}, "probe": {"window": "30s", "interim_interval": "10s", "rate": 50, "preflight": "3s",
                                             "calibration": "3s"},
           "judge": {"engine": "inline", "config": JUDGE}, "timeouts": {"guard": "90s", "warm_up": "180s"},
           "capacity": "not_required", "run_id": run_id}
    raw.update(overrides)
    raw["canary"] = {"control": "none", **raw["canary"]}  # the counted restarts are the canary's and the fleet's
    return raw


# ----- what is measured -----

@dataclass
class Result:
    """What one scenario did. Times are epoch ms; `safe_s` is from the fault to the safe state."""

    scenario: str
    fault: str
    status: str = "?"                   # run.json status at the end (verified promoted|rolled_back, or the step)
    verdict: str | None = None
    fault_ms: int | None = None
    safe_ms: int | None = None
    errors: list[str] = field(default_factory=list)   # what a rollout run raised (expected in some scenarios)
    probe: dict = field(default_factory=dict)         # the rollout's own probe observations: acked, lost, …
    validated: dict = field(default_factory=dict)     # the independent stream: acked, lost, …
    starts: dict[int, int] = field(default_factory=dict)       # broker JVM starts seen from outside
    expected_starts: dict[int, int] = field(default_factory=dict)
    restarts: dict[int, int] = field(default_factory=dict)     # "restart broker" actions in the audit log
    guard_violations: list[str] = field(default_factory=list)
    guard_waits: list[dict] = field(default_factory=list)      # guard refusals and waits in the audit log
    attempts: dict[str, int] = field(default_factory=dict)     # per step, from run.json
    unchanged: bool | None = None       # after a rollback: nodes equal the state before the rollout
    notes: list[str] = field(default_factory=list)
    kills: list[dict] = field(default_factory=list)           # (d) one record per killed step
    runs: int = 1                       # rollout runs to reach the end (a run that raised is run again)
    run_dir: str = ""

    @property
    def safe_s(self) -> float | None:
        if self.fault_ms is None or self.safe_ms is None:
            return None
        return round((self.safe_ms - self.fault_ms) / 1000, 1)

    @property
    def lost(self) -> int:
        return self.probe.get("lost", 0) + self.probe.get("unaccounted", 0) + self.validated.get("lost", 0)

    @property
    def safe(self) -> bool:
        return self.status in ("verified rolled_back", "verified promoted", "refused")

    def row(self) -> dict:
        return {"scenario": self.scenario, "fault": self.fault, "outcome": self.outcome, "verdict": self.verdict,
                "acked": self.probe.get("acked", 0) + self.validated.get("acked", 0), "lost": self.lost,
                "safe_s": self.safe_s, "starts": self.starts, "guard_violations": len(self.guard_violations)}

    @property
    def outcome(self) -> str:
        return self.status.replace("_", " ")


class Validator:
    """Produce-consume-validate beside the rollout: acks=all writes to a topic of its own (RF 3, min.insync.replicas
    2, one partition led by each broker) for the whole scenario; `stop()` reads every partition back from where this
    run started and names each acknowledged message that is not there. Not idempotent: a retry's duplicate does not
    matter to this check, and librdkafka's idempotent producer can end in a fatal state when a broker dies with
    batches in flight."""

    def __init__(self, bootstrap_servers: str, rate: float = 30.0):
        self.bootstrap_servers = bootstrap_servers
        self.rate = rate
        self.tag = uuid.uuid4().hex[:8]
        self.acked: dict[str, tuple[int, int]] = {}
        self.errors = 0
        self.sent = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._producer: Producer | None = None
        self._start: dict[int, int] = {}

    def start(self) -> Validator:
        admin = admin_client(self.bootstrap_servers)
        brokers = sorted(admin.list_topics(timeout=15).brokers)
        parts = [[brokers[(p + i) % len(brokers)] for i in range(min(3, len(brokers)))] for p in range(len(brokers))]
        TopicAdmin(self.bootstrap_servers).create_topic(VALIDATE_TOPIC, parts, {"min.insync.replicas": "2"})
        consumer = self._consumer()
        try:
            deadline = time.monotonic() + 60
            while True:  # a topic just created shows its partitions a moment later
                meta = consumer.list_topics(VALIDATE_TOPIC, timeout=15).topics[VALIDATE_TOPIC]
                if len(meta.partitions) == len(parts) and all(p.leader >= 0 for p in meta.partitions.values()):
                    break
                if time.monotonic() > deadline:
                    raise AssertionError(f"{VALIDATE_TOPIC} has no leaders for its {len(parts)} partitions")
                time.sleep(0.5)
            for p in meta.partitions:
                self._start[p] = consumer.get_watermark_offsets(TopicPartition(VALIDATE_TOPIC, p), timeout=15)[1]
        finally:
            consumer.close()
        self._producer = Producer({**PRODUCER_DEFAULTS, "bootstrap.servers": self.bootstrap_servers, "acks": "all",
                                   "message.timeout.ms": 30000, "linger.ms": 5, "logger": QUIET_LOGGER})
        self._thread = threading.Thread(target=self._produce, name="validator", daemon=True)
        self._thread.start()
        return self

    def _consumer(self) -> Consumer:
        return Consumer({"bootstrap.servers": self.bootstrap_servers, "group.id": f"fault-suite-{self.tag}",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest", "logger": QUIET_LOGGER})

    def _produce(self) -> None:
        partitions = sorted(self._start)
        seq = 0
        while not self._stop.is_set():
            value = f"{self.tag}:{seq}"
            try:
                self._producer.produce(VALIDATE_TOPIC, value.encode(), partition=partitions[seq % len(partitions)],
                                       on_delivery=self._delivered)
                self.sent += 1
                seq += 1
            except (BufferError, KafkaException):
                self.errors += 1
            self._producer.poll(0)
            time.sleep(1 / self.rate)

    def _delivered(self, err, msg) -> None:
        if err is None and msg is not None:
            self.acked[msg.value().decode(errors="replace")] = (msg.partition(), msg.offset())
        else:
            self.errors += 1

    def stop(self) -> dict:
        self._stop.set()
        if self._thread:
            self._thread.join(10)
        if self._producer is not None:
            self._producer.flush(40)
        consumer = self._consumer()
        seen: set[str] = set()
        try:
            ends = {p: consumer.get_watermark_offsets(TopicPartition(VALIDATE_TOPIC, p), timeout=15)[1]
                    for p in self._start}
            consumer.assign([TopicPartition(VALIDATE_TOPIC, p, o) for p, o in self._start.items()])
            position = dict(self._start)
            deadline = time.monotonic() + 90
            while any(position[p] < ends[p] for p in ends) and time.monotonic() < deadline:
                msg = consumer.poll(1.0)
                if msg is None or msg.error() is not None:
                    continue
                position[msg.partition()] = msg.offset() + 1
                value = msg.value().decode(errors="replace")
                if value.startswith(self.tag + ":"):
                    seen.add(value)
        finally:
            consumer.close()
        lost = sorted(v for v in self.acked if v not in seen)
        return {"sent": self.sent, "acked": len(self.acked), "produce_errors": self.errors, "lost": len(lost),
                "lost_examples": [f"{v} at {self.acked[v]}" for v in lost[:5]]}


class Watch:
    """Samples the cluster from outside the rollout about once a second: every partition's replicas, ISR and
    min ISR (the guard's input) and every broker's process (pid, alive)."""

    def __init__(self, cluster: LocalCluster, period: float = 1.0):
        self.directory = cluster.directory
        self.bootstrap_servers = cluster.bootstrap_servers
        self.period = period
        self.samples: list[tuple[int, list[guard.PartitionView] | None, dict[int, int | None]]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="watch", daemon=True)

    def start(self) -> Watch:
        self._sample()
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)

    def _run(self) -> None:
        while not self._stop.wait(self.period):
            self._sample()

    def _sample(self) -> None:
        pids: dict[int, int | None] = {}
        with contextlib.suppress(Exception):  # a state file being replaced: the next sample reads it
            state = ClusterState.load(self.directory)
            for n in state.brokers:
                alive = process.is_ours(n.pid, n.pid_start, process.marker(self.directory, n.node_id))
                pids[n.node_id] = n.pid if alive else None
        try:
            partitions = guard.observe(self.bootstrap_servers, timeout=5)
        except Exception:
            partitions = None
        self.samples.append((int(time.time() * 1000), partitions, pids))

    def starts(self) -> dict[int, int]:
        """JVM starts per broker after the first sample (a new pid seen alive)."""
        seen: dict[int, set[int]] = {}
        first = self.samples[0][2] if self.samples else {}
        for _, _, pids in self.samples:
            for broker, pid in pids.items():
                if pid is not None:
                    seen.setdefault(broker, set()).add(pid)
        return {b: len(pids - {first.get(b)}) for b, pids in sorted(seen.items())}

    def down(self, at_ms: int) -> set[int]:
        """Brokers whose process was not alive in the last sample before `at_ms`."""
        before = [s for s in self.samples if s[0] <= at_ms]
        return {b for b, pid in before[-1][2].items() if pid is None} if before else set()

    def violations(self, audit: list[dict]) -> list[str]:
        """Broker restarts the guard should have refused:
        - seen from outside: a live broker restarted while another broker's process was down (with replication
          factor 3 on 3 brokers, every partition it is in the ISR of would drop below min.insync.replicas 2). The
          processes are the ground truth here; the sampled ISR is not: a broker's metadata lags the controller's by
          a moment, and a sample taken just before another broker rejoined the ISR reads as a refusal;
        - in the audit log: a restart in the same attempt of a step after the guard refused that broker."""
        found = []
        refused: set[tuple[str, int]] = set()
        for e in audit:
            if e["action"] == "step started":
                refused = {r for r in refused if r[0] != e["step"]}
            elif e["action"] == "guard refused":  # one broker, or a batch
                refused.update((e["step"], b) for b in e.get("brokers") or [e["broker"]])
            if e["action"] != "restart broker":
                continue
            broker, at = e["broker"], e["ts_ms"]
            if (e["step"], broker) in refused:
                found.append(f"{e['step']}: broker {broker} restarted at {at} after the guard refused it")
            down = self.down(at)
            if broker not in down and down:  # starting a broker that is down cannot take anything away
                found.append(f"{e['step']}: broker {broker} restarted at {at} while broker(s) {sorted(down)} "
                             f"were down")
        return found


def probe_accounting(run_dir: Path, audit: list[dict], bootstrap_servers: str | None = None) -> dict:
    """The rollout's own probes, ProduceConsumeValidate style: in every observations file each acknowledged
    message must have been received (outcome delivered or out_of_order), and a probe that finished must account in
    its file for every message its summary counted as acknowledged (`unaccounted`: in flight when it stopped,
    neither received nor declared lost). The probe declares lost what it did not receive within its 15 s
    round-trip SLA; given `bootstrap_servers`, each of those is looked for in its partition's log: found, it is
    `late` (the probe's consumer stalled, or stopped first); not found, it is `lost`."""
    acked = lost = 0
    examples: list[str] = []
    candidates: dict[tuple[str, int], dict[str, str]] = {}
    per_file: dict[str, int] = {}
    for path in sorted(run_dir.glob("observations-*.jsonl")):
        n = 0
        for line in path.read_text().splitlines():
            if not line.strip():
                continue
            o = json.loads(line)
            if o.get("kind") == BROKER_KIND:  # a broker's reading, not a message
                continue
            if o["outcome"] == "duplicate" or o.get("ack_ts") is None:
                continue
            n += 1
            if o["outcome"] not in ("delivered", "out_of_order"):
                lost += 1
                candidates.setdefault((o["topic"], o["partition"]), {})[o["message_id"]] = (
                    f"{path.name}: {o['message_id']} {o['outcome']} ({o.get('error')})")
        per_file[path.stem.removeprefix("observations-")] = n
        acked += n
    # A probe named <run id>-<name> writes observations-<name>.jsonl; a step run again writes it anew, so the last
    # summary of each name is the one its file belongs to.
    summaries: dict[str, int] = {}
    for e in audit:
        if e["action"] in ("probe", "probe during the rolls"):
            summaries[e["probe_run_id"].removeprefix(e["run_id"] + "-")] = e["acked"]
    run = json.loads((run_dir / "run.json").read_text()) if (run_dir / "run.json").exists() else {}
    window = run.get("window") or {}
    if window:
        summaries[window["probe_run_id"].removeprefix(run["run_id"] + "-")] = sum(
            lane["acked"] for lane in window["probe"].values())
    unaccounted = sum(max(0, count - per_file.get(name, 0)) for name, count in summaries.items())
    late: set[str] = set()
    if bootstrap_servers and candidates:
        late = in_log(bootstrap_servers, {tp: set(ids) for tp, ids in candidates.items()})
    examples = [text for ids in candidates.values() for mid, text in ids.items() if mid not in late][:5]
    return {"acked": acked, "lost": lost - len(late), "late": len(late), "unaccounted": unaccounted,
            "lost_examples": examples, "files": len(per_file)}


def in_log(bootstrap_servers: str, wanted: dict[tuple[str, int], set[str]]) -> set[str]:
    """The probe message ids of `wanted` (per topic and partition) that are in the partition's log now."""
    found: set[str] = set()
    consumer = Consumer({"bootstrap.servers": bootstrap_servers, "group.id": f"fault-suite-{uuid.uuid4().hex[:8]}",
                         "enable.auto.commit": False, "logger": QUIET_LOGGER})
    try:
        for (topic, partition), ids in wanted.items():
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=15)
            consumer.assign([TopicPartition(topic, partition, low)])
            position, deadline = low, time.monotonic() + 90
            while position < high and time.monotonic() < deadline:
                msg = consumer.poll(1.0)
                if msg is None or msg.error() is not None:
                    continue
                position = msg.offset() + 1
                with contextlib.suppress(ValueError, KeyError, TypeError):
                    if (mid := json.loads(msg.value())["messageId"]) in ids:
                        found.add(mid)
    finally:
        consumer.close()
    return found


# ----- faults -----

def hard_kill(cluster: LocalCluster, node_id: int, role: str = "broker") -> int:
    """SIGKILL of one node's JVM from outside, as a crash: the cluster's state still wants it running.
    Returns the time (epoch ms)."""
    state = ClusterState.load(cluster.directory)
    node = state.node(node_id, role)
    mark = process.marker(cluster.directory, node_id)
    if not process.is_ours(node.pid, node.pid_start, mark):
        raise AssertionError(f"{role} {node_id} is not running; nothing to kill")
    at = int(time.time() * 1000)
    process.stop(node.pid, node.pid_start, mark, kill=True, timeout=15)
    return at


def quorum_leader(cluster: LocalCluster) -> int:
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers, request_timeout_ms=10000,
                             client_id="fault-suite")
    try:
        return admin.describe_metadata_quorum()["topics"][0]["partitions"][0]["leader_id"]
    finally:
        admin.close()


def audit_of(run_dir: Path) -> list[dict]:
    path = run_dir / "audit.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


class When(threading.Thread):
    """Runs `action` once `condition(audit entries)` holds (polled every 0.1 s), `delay` seconds later; keeps when
    it acted (epoch ms, or what `action` returned) and what it raised."""

    def __init__(self, run_dir: Path, condition: Callable[[list[dict]], bool], action: Callable[[], int | None],
                 delay: float = 0.0, timeout: float = 600.0):
        super().__init__(name="fault", daemon=True)
        self.run_dir, self.condition, self.action, self.delay, self.timeout = run_dir, condition, action, delay, timeout
        self.at_ms: int | None = None
        self.error: BaseException | None = None
        self._cancel = threading.Event()

    def run(self) -> None:
        deadline = time.monotonic() + self.timeout
        try:
            while not self._cancel.is_set() and time.monotonic() < deadline:
                if self.condition(audit_of(self.run_dir)):
                    if self.delay:
                        time.sleep(self.delay)
                    done = self.action()
                    self.at_ms = done if isinstance(done, int) else int(time.time() * 1000)
                    return
                time.sleep(0.1)
        except BaseException as exc:  # reported by the scenario, not lost in a thread
            self.error = exc

    def cancel(self) -> None:
        self._cancel.set()
        self.join(60)


def seen(step: str, action: str, **match) -> Callable[[list[dict]], bool]:
    return lambda entries: any(e["step"] == step and e["action"] == action
                               and all(e.get(k) == v for k, v in match.items()) for e in entries)


# ----- the harness -----

def nodes(cluster: LocalCluster) -> dict:
    cluster.reload()
    return {(n.role, n.node_id): (n.version, dict(n.config), n.rack) for n in cluster.state.nodes}


def heal(cluster: LocalCluster) -> list[str]:
    """Before a scenario: every node running, the cluster healthy, no rollout lock. Returns what had to be fixed
    (nothing, unless the scenario before failed half-way)."""
    fixed = []
    cluster.reload()
    for n in cluster.state.nodes:
        if not cluster.is_running(n):
            cluster.start_node(n.node_id, wait=False)
            fixed.append(f"started {n.role} {n.node_id}")
    cluster.wait_healthy(180)
    removed = ClusterLock(cluster.bootstrap_servers).force_release()
    if removed is not None:
        fixed.append(f"broke the lock of {removed}")
    return fixed


@contextlib.contextmanager
def observed(result: Result, cluster: LocalCluster, run_dir: Path) -> Iterator[Watch]:
    """The validator and the watch around a scenario; fills the result's measurements at the end."""
    before = nodes(cluster)
    validator = Validator(cluster.bootstrap_servers).start()
    watch = Watch(cluster).start()
    try:
        yield watch
    finally:
        watch.stop()
        result.validated = validator.stop()
        entries = audit_of(run_dir)
        result.run_dir = str(run_dir)
        result.starts = watch.starts()
        result.guard_violations = watch.violations(entries)
        result.guard_waits = [{k: e.get(k) for k in ("step", "action", "broker", "waited_s", "reason")}
                              for e in entries if e["action"] in ("guard refused", "guard allowed after waiting")]
        for e in entries:
            if e["action"] == "restart broker":
                result.restarts[e["broker"]] = result.restarts.get(e["broker"], 0) + 1
        result.probe = probe_accounting(run_dir, entries, cluster.bootstrap_servers)
        run = json.loads((run_dir / "run.json").read_text()) if (run_dir / "run.json").exists() else {}
        if result.status == "?":
            result.status = run.get("status", "?")
            if run.get("before") is None and not result.restarts:
                result.status = "refused"  # before any change
                failed = [e["ts_ms"] for e in entries if e["action"] == "step failed"]
                result.safe_ms = failed[-1] if failed else None
        result.verdict = (run.get("verdict") or {}).get("verdict")
        result.attempts = {k: v["attempts"] for k, v in (run.get("steps") or {}).items()}
        verified = [e["ts_ms"] for e in entries if e["step"] == "verify" and e["action"] == "step finished"]
        if result.safe_ms is None and verified and result.status.startswith("verified"):
            result.safe_ms = verified[-1]
        if result.status == "verified rolled_back":
            result.unchanged = nodes(cluster) == before


def _run(rollout_of: Callable[[], Rollout], result: Result, runs: int = 3, **kwargs) -> RunSummary | None:
    """run_rollout on a fresh Rollout (as a retried process builds it), run again after an error up to `runs` times
    in all, as the DAG retries its converging tasks twice; each error is kept in `result.errors`, not raised."""
    for attempt in range(1, runs + 1):
        try:
            out = run_all(BROKER, rollout_of(), **kwargs)
            result.runs = attempt
            return out
        except Exception as exc:
            result.errors.append(f"run {attempt}: {type(exc).__name__}: {exc}")
            result.runs = attempt
            time.sleep(5)
    return None


def _run_with_fault(result: Result, fault: When, rollout_of: Callable[[], Rollout], **kwargs) -> None:
    """`_run` while `fault` waits for its moment; when the fault struck, and what it raised, go into the result."""
    fault.start()
    try:
        _run(rollout_of, result, **kwargs)
    finally:
        fault.cancel()
    result.fault_ms = fault.at_ms
    if fault.error:
        result.errors.append(f"fault: {fault.error}")


# ----- the scenarios -----

def probe_window_kill(cluster: LocalCluster, work: Path) -> Result:
    """(a) A baseline broker SIGKILLed 10 s into the probe window; nobody restarts it but the rollout."""
    result = Result("a", "baseline broker 1 SIGKILLed 10 s into the probe window")
    run_dir = work / "a"
    spec = load_spec(spec_raw(cluster, "fault-a", 5))
    with observed(result, cluster, run_dir):
        kill = When(run_dir, seen("probe-window", "probe started"), lambda: hard_kill(cluster, 1), delay=10)
        _run_with_fault(result, kill, lambda: Rollout(spec, run_dir))
    result.expected_starts = {1: 1, 3: 2}  # the killed broker once; the canary deployed and rolled back
    return result


def deploy_kill(cluster: LocalCluster, work: Path) -> Result:
    """(b) Two canary brokers; baseline broker 1 SIGKILLed while the first canary restarts. The guard must hold the
    second canary's restart while broker 1 is down; the deploy waits (timeouts.guard) and fails, and the rollout
    rolls back."""
    result = Result("b", "baseline broker 1 SIGKILLed while canary broker 2 restarts (deploy)")
    run_dir = work / "b"
    spec = load_spec(spec_raw(cluster, "fault-b", 6, canary={"count": 2}, timeouts={"guard": "30s",
                                                                                      "warm_up": "180s"}))
    with observed(result, cluster, run_dir):
        kill = When(run_dir, seen("deploy-canary", "restart broker", broker=2), lambda: hard_kill(cluster, 1),
                    delay=2)
        _run_with_fault(result, kill, lambda: Rollout(spec, run_dir))
    result.expected_starts = {1: 1, 2: 2, 3: 0}
    return result


def promote_kill(cluster: LocalCluster, work: Path) -> Result:
    """(c) During promote, broker 1 (already promoted) SIGKILLed while broker 2 restarts. A run that stops is run
    again (an Airflow retry): the rollout must end promoted and verified, no broker restarted more than the change
    needs."""
    result = Result("c", "promoted broker 1 SIGKILLed while promote restarts broker 2")
    run_dir = work / "c"
    spec = load_spec(spec_raw(cluster, "fault-c", 7, timeouts={"guard": "30s", "warm_up": "180s"},
                              judge={"engine": "inline", "config": PROMOTING_JUDGE}))
    with observed(result, cluster, run_dir):
        kill = When(run_dir, seen("promote", "restart broker", broker=2), lambda: hard_kill(cluster, 1), delay=2)
        _run_with_fault(result, kill, lambda: Rollout(spec, run_dir), approve=True)
    # broker 1: promoted, then started again after the kill; 2: promoted; 3: canary, then promoted
    result.expected_starts = {1: 2, 2: 1, 3: 2}
    return result


# Where to kill the process running each step (an Airflow worker running its task): once this audit entry of the
# step appears, this many seconds later — in the middle of what the step changes or waits for.
STEP_KILLS = {
    "preflight": (("preflight", "lock taken"), 1.0),           # during the green baseline probe, the lock taken
    "deploy-canary": (("deploy-canary", "restart broker"), 3.0),  # while the canary broker restarts
    "warm-up": (("warm-up", "step started"), 0.0),
    "lead": (("lead", "step started"), 0.0),
    "probe-window": (("probe-window", "probe started"), 8.0),  # mid-window
    "judge": (("judge", "step started"), 0.0),
    "promote": (("promote", "restart broker"), 3.0),           # while the first broker restarts
    "rollback": (("rollback", "restart broker"), 3.0),
    "verify": (("verify", "step started"), 1.0),                # during the green probe, before the lock is freed
}


def _cli(step: str, spec_file: Path, run_dir: Path, log: Path, approve: bool = False) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "canary.cli", "rollout", step, "--spec", str(spec_file), "--run-dir", str(run_dir)]
    with open(log, "ab") as out:
        return subprocess.Popen(cmd + (["--approve"] if approve else []), stdout=out, stderr=subprocess.STDOUT,
                                env={**os.environ, "PYTHONUNBUFFERED": "1"}, start_new_session=True)


def _step_status(run_dir: Path, step: str) -> str | None:
    with contextlib.suppress(FileNotFoundError, json.JSONDecodeError):
        return json.loads((run_dir / "run.json").read_text())["steps"].get(step, {}).get("status")
    return None


def step_kills(cluster: LocalCluster, work: Path) -> Result:
    """(d) Every step run as `kafka-canary rollout <step> --spec F` in its own process, SIGKILLed (with its whole
    process group) in the middle of the step, then run again as an Airflow retry would. The rollout must converge,
    no broker may be restarted more often than the change needs, and run.json / the audit log show 2 attempts of
    every step. The gate looks only at lost messages, so the path is promote (--approve, were it INCONCLUSIVE), the
    step that rolls every broker."""
    result = Result("d", "the process running each step SIGKILLed mid-step, then the step re-run")
    run_dir = work / "d"
    run_dir.mkdir(parents=True, exist_ok=True)
    spec_file = work / "d-spec.json"
    spec_file.write_text(json.dumps(spec_raw(cluster, "fault-d", 8, judge={"engine": "inline",
                                                                         "config": PROMOTING_JUDGE})))
    kills: list[dict] = []
    with observed(result, cluster, run_dir):
        for step in STEP_ORDER:
            if step in ("promote", "rollback"):
                verdict = (json.loads((run_dir / "run.json").read_text()).get("verdict") or {}).get("verdict")
                if (step == "promote") == (verdict == "ROLLBACK"):
                    continue
            (when_step, action), delay = STEP_KILLS[step]
            log = work / f"d-{step}.log"
            proc = _cli(step, spec_file, run_dir, log, approve=step == "promote")
            record = {"step": step, "killed": False, "mid_step": False}
            deadline = time.monotonic() + 600
            while proc.poll() is None and time.monotonic() < deadline:
                entries = audit_of(run_dir)
                if seen(when_step, action)(entries) and any(
                        e["step"] == step and e["action"] == "step started" and e.get("attempt") == 1
                        for e in entries):
                    time.sleep(delay)
                    record["mid_step"] = _step_status(run_dir, step) == "running" and proc.poll() is None
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(proc.pid, signal.SIGKILL)
                    record["killed"] = True
                    record["kill_ms"] = int(time.time() * 1000)
                    break
                time.sleep(0.1)
            proc.wait()
            if result.fault_ms is None and record["killed"]:
                result.fault_ms = record["kill_ms"]
            for _ in range(3):  # the DAG retries a failed task twice: a step stopped unfinished is run again
                retry = _cli(step, spec_file, run_dir, log, approve=step == "promote")
                record["retry_exit"] = retry.wait(900)
                if record["retry_exit"] != Outcome.UNFINISHED.exit_code:
                    break
            record["attempts"] = json.loads((run_dir / "run.json").read_text())["steps"][step]["attempts"]
            finished = [e["ts_ms"] for e in audit_of(run_dir) if e["step"] == step and e["action"] == "step finished"]
            if record["killed"] and finished:
                record["converged_s"] = round((finished[-1] - record["kill_ms"]) / 1000, 1)
            kills.append(record)
            if record["retry_exit"] not in (0, 1, 3):  # judge exits 1/3 by verdict
                result.errors.append(f"{step} re-run exited {record['retry_exit']}; see {log}")
                break
    result.kills = kills
    promoted = result.status == "verified promoted"
    result.expected_starts = {1: 1, 2: 1, 3: 2} if promoted or result.verdict == "PROMOTE" else {3: 2}
    return result


def controller_restart(cluster: LocalCluster, work: Path) -> Result:
    """(e) The controller quorum leader SIGKILLed and started again while the canary broker restarts (its
    registration goes through the quorum)."""
    result = Result("e", "controller quorum leader SIGKILLed and restarted while the canary broker restarts")
    run_dir = work / "e"
    spec = load_spec(spec_raw(cluster, "fault-e", 9))

    def restart_leader() -> int:
        leader = quorum_leader(cluster)
        at = hard_kill(cluster, leader, "controller")
        # Not through `cluster`: its JVMs die with the thread that starts them (PR_SET_PDEATHSIG follows the
        # thread), and this one ends now. The fixture's sweep of the directory still stops it at the end.
        LocalCluster.open(cluster.directory).start_node(leader, wait=False)
        result.notes.append(f"quorum leader {leader} killed and started again")
        return at

    with observed(result, cluster, run_dir):
        fault = When(run_dir, seen("deploy-canary", "restart broker"), restart_leader, delay=3)
        _run_with_fault(result, fault, lambda: Rollout(spec, run_dir))
        with contextlib.suppress(Exception):
            result.notes.append(f"quorum leader afterwards {quorum_leader(cluster)}")
    promoted = result.status == "verified promoted"
    result.expected_starts = {1: 1, 2: 1, 3: 2} if promoted else {3: 2}
    return result


def analysis_timeout(cluster: LocalCluster, work: Path, seconds: float = 5.0) -> Result:
    """(f) The Spark analysis of a canary the gate would promote (it looks only at lost messages, so no interim
    look stops the window first) times out: the real job, its time limit cut to a few seconds at the engine
    boundary (canary.analysis.analyze). The gate must not promote; the canary is rolled back."""
    result = Result("f", f"the Spark analysis timed out (limit cut to {seconds:g} s)")
    run_dir = work / "f"
    spec = load_spec(spec_raw(cluster, "fault-f", 10, judge={"engine": "spark", "config": PROMOTING_JUDGE}))
    from canary import analysis

    real = analysis.analyze
    calls: list[int] = []

    def cut_short(*args, **kwargs) -> analysis.AnalysisResult:
        calls.append(int(time.time() * 1000))
        return real(*args, **{**kwargs, "timeout": seconds})

    with observed(result, cluster, run_dir), mock.patch.object(analysis, "analyze", cut_short):
        _run(lambda: Rollout(spec, run_dir), result)
    result.fault_ms = calls[0] if calls else None
    result.notes.append(f"analysis calls: {len(calls)}")
    result.expected_starts = {3: 2}
    return result


def airflow_task_kill(cluster: LocalCluster, work: Path) -> Result:
    """(g) The same through a real Airflow task: a DAG run of kafka_broker_canary in a fresh AIRFLOW_HOME (SQLite),
    `airflow tasks test kafka_broker_canary preflight <run id>`, then `… deploy_canary <run id>` SIGKILLed while
    the canary broker restarts and run again (the task's retry); the rest of the rollout from the run directory
    the tasks share (the same spec the DAG builds from its params)."""
    from canary.demo import airflow_command, airflow_env

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "plugins"))
    from kafka_canary_provider.runs import rollout_run_id, spec_from_params

    result = Result("g", "the Airflow task deploy_canary (airflow tasks test) SIGKILLed mid-restart, then re-run")
    home, runs = work / "g-airflow", work / "g-runs"
    home.mkdir(parents=True, exist_ok=True)
    env = airflow_env(home, runs, cluster.directory)
    params = {"cluster_conn_id": "kafka_canary_default", "target_version": None,
              "config_overrides": {"num.io.threads": "11"}, "canary_count": 1, "window": "30s",
              "interim_interval": "10s", "probe_rate": 50, "preflight_probe": "3s", "judge_config": JUDGE,
              "engine": "inline", "finalize": True, "on_inconclusive": "rollback", "client_delay_ms": 0,
              "guard_timeout": "90s", "warm_up_timeout": "180s", "capacity": "not_required"}
    airflow_run = "fault-g"
    run_dir = runs / rollout_run_id(airflow_run)
    log = work / "g-airflow.log"

    def airflow(*args: str, wait: bool = True) -> subprocess.Popen | int:
        with open(log, "ab") as out:
            proc = subprocess.Popen([airflow_command(), *args], env=env, stdout=out, stderr=subprocess.STDOUT,
                                    start_new_session=True)
        return proc.wait(900) if wait else proc

    def task(task_id: str, wait: bool = True):
        return airflow("tasks", "test", "kafka_broker_canary", task_id, airflow_run, "-t", json.dumps(params),
                       wait=wait)

    for args in (("db", "migrate"), ("dags", "reserialize"),
                 ("dags", "trigger", "kafka_broker_canary", "--run-id", airflow_run, "-c", json.dumps(params))):
        if (code := airflow(*args)) != 0:
            result.errors.append(f"airflow {' '.join(args[:2])} exited {code}; see {log}")
            return result
    spec = load_spec(spec_from_params(params, {"deployer": "local", "dir": str(cluster.directory)},
                                      rollout_run_id(airflow_run)))
    with observed(result, cluster, run_dir):
        for _ in range(3):  # refused on a saturated machine before any change: triggered again
            task("preflight")  # `tasks test` exits 0 whether or not the task failed: run.json says
            if _step_status(run_dir, "preflight") == "done":
                break
        proc = task("deploy_canary", wait=False)
        deadline = time.monotonic() + 600
        while proc.poll() is None and time.monotonic() < deadline:
            if seen("deploy-canary", "restart broker")(audit_of(run_dir)):
                time.sleep(3)
                mid = _step_status(run_dir, "deploy-canary") == "running" and proc.poll() is None
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                result.fault_ms = int(time.time() * 1000)
                result.kills = [{"step": "deploy-canary", "killed": True, "mid_step": mid, "kill_ms": result.fault_ms}]
                break
            time.sleep(0.1)
        proc.wait()
        task("deploy_canary")
        if _step_status(run_dir, "deploy-canary") != "done":
            result.errors.append(f"the re-run of deploy_canary did not finish the step; see {log}")
        _run(lambda: Rollout(spec, run_dir), result)
    # The DAG's default spec has a control broker: restarted once more, in deploy-canary, whatever the verdict.
    controls = json.loads((run_dir / "run.json").read_text()).get("control_brokers") or []
    expected = {1: 1, 2: 1, 3: 2} if result.status == "verified promoted" else {3: 2}
    result.expected_starts = {b: expected.get(b, 0) + (b in controls) for b in {*expected, *controls}}
    return result


SCENARIOS: dict[str, Callable[[LocalCluster, Path], Result]] = {
    "a": probe_window_kill, "b": deploy_kill, "c": promote_kill, "d": step_kills, "e": controller_restart,
    "f": analysis_timeout, "g": airflow_task_kill,
}
