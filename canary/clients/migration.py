"""The KIP-848 migration canary: a consumer service moves from the classic group protocol to
`group.protocol=consumer`, canary instances first (issue 6, item 5; docs/migration-canary.md).

    result = run_migration(MigrationSpec(bootstrap_servers=servers, topic="orders", group="billing",
                                         out_dir=Path("runs/billing")))
    result["verdict"]  # PROMOTE / ROLLBACK / INCONCLUSIVE; result.json and verdict.json in out_dir

Steps: **preflight** (reads only: finalized group.version >= 1, the brokers accept the consumer protocol and let a
group migrate, the topic exists with a partition per instance, the group has no member that is not ours) →
**window** (every instance subscribes to the topic in ONE group: baseline instances on `classic`, canary instances,
marked by `canary.lanes.canary_client_id`, on `consumer`; a producer writes steady traffic; one baseline instance
restarts, so both protocols have a rebalance to handle) → **judge** (lag and processing time through the judge,
rebalance disruption by canary.clients.rebalance.compare) → **promote** (baseline instances switch to `consumer`
one at a time, each closing cleanly and committing) or **rollback** (canary instances back to `classic`) →
**verify** (every instance on the promised protocol, the group stable, every produced record consumed at least once).

The instances are threads of this process, each with its own librdkafka consumer (its own connections and group
membership, so the broker sees separate members as with separate processes): the disruption accounting compares
callback times across instances, which needs one clock, and no instance can outlive the run.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import threading
import time
import uuid
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml
from confluent_kafka import TIMESTAMP_NOT_AVAILABLE, Consumer, KafkaError, KafkaException, Message, Producer
from confluent_kafka import TopicPartition as TP
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

from canary.clients.observe import ClientObserver
from canary.clients.rebalance import EventKind, RebalanceEvent, account, combine, compare
from canary.clients.view import connection_settings
from canary.errors import CanaryError
from canary.judge import INCONCLUSIVE, PROMOTE, ROLLBACK, Aggregates, judge
from canary.judge.config import DEFAULT_METRICS, JudgeConfig, config_from_dict
from canary.kafka import features
from canary.kafka.clients import PRODUCER_DEFAULTS, QUIET_LOGGER
from canary.kafka.secrets import redacted
from canary.kafka.settings import kafka_python_settings
from canary.lanes import canary_client_id, client_lane
from canary.observations import Lane, read_file_counted
from canary.probe.sink import ObservationSink

log = logging.getLogger(__name__)

Protocol = Literal["classic", "consumer"]
Action = Literal["auto", "promote", "rollback"]
# Broker policies that let a non-empty classic group take its first consumer-protocol member (KIP-848 online upgrade).
UPGRADE_POLICIES = ("upgrade", "bidirectional")
# The judged client metrics; every other judge metric is off (the instances write no produce or probe data).
JUDGED = ("lag_p99", "processing_latency_p99")
EXIT_CODES = {PROMOTE: 0, ROLLBACK: 1, INCONCLUSIVE: 3}


class MigrationError(CanaryError):
    """The migration canary cannot go on as asked."""


class MigrationRefused(MigrationError):
    """Preflight refused: nothing was started or changed; the message says what to do."""


@dataclass(frozen=True)
class MigrationSpec:
    """bootstrap_servers, topic, group: the service's cluster, topic and group id. baseline / canary: instance
    counts (baseline on classic, canary on consumer). rate: records/s the canary's producer writes. window_s: the
    compared window; disturb_at_s: when (into the window) one baseline instance restarts, restart_gap_s how long it
    stays away. classic_assignor: partition.assignment.strategy of classic instances (None: librdkafka's default,
    eager range,roundrobin). remote_assignor: group.remote.assignor of consumer instances (None: the broker's
    default). client: librdkafka connection/security settings. action: after the verdict, `auto` (promote on
    PROMOTE, otherwise roll back), `promote` or `rollback` (a person decided). judge_config: YAML merged over the
    migration's judge defaults. settle_timeout_s: how long the group may take to settle after each change."""

    bootstrap_servers: str
    topic: str
    group: str
    out_dir: Path
    baseline: int = 3
    canary: int = 1
    rate: float = 40.0
    window_s: float = 60.0
    disturb_at_s: float = 20.0
    restart_gap_s: float = 2.0
    classic_assignor: str | None = None
    remote_assignor: str | None = None
    client: dict[str, str] = field(default_factory=dict)
    action: Action = "auto"
    judge_config: str | None = None
    settle_timeout_s: float = 120.0

    def validate(self) -> MigrationSpec:
        if not self.bootstrap_servers or not self.topic or not self.group:
            raise MigrationError("bootstrap servers, topic and group are required")
        if self.baseline < 1 or self.canary < 1:
            raise MigrationError(f"need at least one baseline and one canary instance (N >= 2), got baseline "
                                 f"{self.baseline}, canary {self.canary}")
        if self.rate <= 0:
            raise MigrationError(f"rate must be > 0 records/s, got {self.rate}")
        if not 0 < self.disturb_at_s < self.window_s:
            raise MigrationError(f"disturb_at_s must be inside the window (0, {self.window_s}), got "
                                 f"{self.disturb_at_s}")
        if self.restart_gap_s < 0 or self.settle_timeout_s <= 0:
            raise MigrationError("restart_gap_s must be >= 0 and settle_timeout_s > 0")
        if self.action not in ("auto", "promote", "rollback"):
            raise MigrationError(f"action must be auto, promote or rollback, got {self.action!r}")
        return self

    @property
    def names(self) -> list[str]:
        """Instance client ids: baseline `<group>-<i>`, canary `<group>-<i>-canary` (the canary marker)."""
        base = [f"{self.group}-{i}" for i in range(self.baseline)]
        return base + [canary_client_id(f"{self.group}-{self.baseline + i}") for i in range(self.canary)]

    def connection(self) -> dict[str, Any]:
        return {**connection_settings(self.client), "bootstrap.servers": self.bootstrap_servers}


# ----- 1. preflight -----

def preflight(spec: MigrationSpec, timeout: float = 30.0) -> dict:
    """Reads the cluster and the group; raises MigrationRefused (nothing changed) when the migration cannot start.
    Returns the evidence: group.version, the brokers' group settings, the topic's partitions, the group's state."""
    spec.validate()
    levels = features.describe(spec.bootstrap_servers, kafka_python_settings(spec.client))
    level = levels.finalized.get("group.version", 0)
    top = levels.supported.get("group.version", (0, 0))[1]
    if level < 1:
        where = (f"the brokers support group.version up to {top}: finalize it with `kafka-canary cluster finalize "
                 f"--feature group.version=1` (or the broker rollout's finalize step)" if top >= 1 else
                 "the brokers do not support it at all (Kafka < 4.0): roll every broker to Kafka 4.0 or newer "
                 "(kafka-canary rollout), then finalize group.version=1")
        raise MigrationRefused(f"group.version is finalized at {level} on {spec.bootstrap_servers}; the consumer "
                               f"group protocol (KIP-848) needs group.version >= 1, and {where}. Nothing was "
                               f"changed.")
    admin = AdminClient({**spec.connection(), "logger": QUIET_LOGGER})
    settings = _broker_settings(admin, timeout)
    protocols = [p.strip() for p in (settings.get("group.coordinator.rebalance.protocols") or "").split(",")]
    if "consumer" not in protocols:
        raise MigrationRefused(f"the brokers' group.coordinator.rebalance.protocols is {protocols}: add `consumer` "
                               f"(and roll the brokers) before migrating. Nothing was changed.")
    policy = settings.get("group.consumer.migration.policy") or "bidirectional"
    if policy not in UPGRADE_POLICIES:
        raise MigrationRefused(f"group.consumer.migration.policy is {policy!r}: a running classic group cannot take "
                               f"a consumer-protocol member; set it to `bidirectional` (4.x default) or `upgrade`. "
                               f"Nothing was changed.")
    partitions = topic_partitions(admin, spec.topic, timeout)
    if partitions is None:
        raise MigrationRefused(f"topic {spec.topic!r} does not exist on {spec.bootstrap_servers}; the migration "
                               f"canary consumes the service's topic and does not create it. Nothing was changed.")
    instances = spec.baseline + spec.canary
    if len(partitions) < instances:
        raise MigrationRefused(f"topic {spec.topic!r} has {len(partitions)} partition(s) for {instances} instances: "
                               f"an instance without a partition shows no disruption; use fewer instances or more "
                               f"partitions. Nothing was changed.")
    group = describe_group(admin, spec.group, 2 * timeout)  # the first group lookup of a new cluster is slow
    if group["members"]:
        raise MigrationRefused(f"group {spec.group!r} has {len(group['members'])} member(s) not started by this run "
                               f"({', '.join(sorted({m['client_id'] for m in group['members']}))}); stop them, wait "
                               f"for their session timeout, or use another group. Nothing was changed.")
    return {"group_version": level, "group_version_supported_max": top, "rebalance_protocols": protocols,
            "migration_policy": policy, "migration_policy_is_default": settings.get("_policy_default") == "true",
            "consumer_heartbeat_interval_ms": settings.get("group.consumer.heartbeat.interval.ms"),
            "topic_partitions": len(partitions), "group_before": group}


def _broker_settings(admin: AdminClient, timeout: float) -> dict[str, str | None]:
    """The group settings of one broker (every broker of a healthy rollout runs the same)."""
    brokers = admin.describe_cluster(request_timeout=timeout).result(timeout=timeout + 5).nodes
    resource = ConfigResource(ResourceType.BROKER, str(min(b.id for b in brokers)))
    try:
        entries = admin.describe_configs([resource], request_timeout=timeout)[resource].result(timeout=timeout + 5)
    except KafkaException as exc:
        raise MigrationError(f"reading broker {resource.name}'s configuration failed: {exc.args[0].str()}") from exc
    wanted = ("group.coordinator.rebalance.protocols", "group.consumer.migration.policy",
              "group.consumer.heartbeat.interval.ms")
    found: dict[str, str | None] = {k: entries[k].value for k in wanted if k in entries}
    if "group.consumer.migration.policy" in entries:
        found["_policy_default"] = str(entries["group.consumer.migration.policy"].is_default).lower()
    return found


def topic_partitions(admin: AdminClient, topic: str, timeout: float) -> list[int] | None:
    """The topic's partitions, or None when the cluster does not know it."""
    meta = admin.list_topics(topic, timeout=timeout).topics.get(topic)
    if meta is None or meta.error is not None and meta.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
        return None
    if meta.error is not None:
        raise MigrationError(f"reading topic {topic!r} failed: {meta.error.str()}")
    return sorted(meta.partitions)


_RETRY_DESCRIBE = (KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_NOT_AVAILABLE,
                       KafkaError.COORDINATOR_LOAD_IN_PROGRESS, KafkaError._TIMED_OUT)


def describe_group(admin: AdminClient, group: str, timeout: float) -> dict:
    """The group as the coordinator sees it: state, type (classic/consumer), members with their assignments.
    `protocol` per member: in a CLASSIC group every member is classic (a classic group cannot hold a KIP-848
    member). In a CONSUMER group it is read from the member id: the classic coordinator names a member
    `<client.id>-<uuid>`, a KIP-848 member names itself with a bare uuid -- but a classic member that joined while
    the group was already a consumer group also gets a bare uuid from the coordinator (measured: the baseline
    instance restarted mid-window), so there "consumer" means "consumer, or classic joined mid-migration"; the
    admin API of confluent-kafka 2.16 has no per-member protocol (KIP-1099's `upgraded`)."""
    deadline = time.monotonic() + timeout
    while True:
        # short attempts: on a new cluster the first coordinator lookup waits for __consumer_offsets to be created
        attempt = max(1.0, min(10.0, deadline - time.monotonic()))
        try:
            found = admin.describe_consumer_groups([group], request_timeout=attempt)[group].result(timeout=attempt + 5)
            break
        except KafkaException as exc:
            code = exc.args[0].code()
            if code == KafkaError.GROUP_ID_NOT_FOUND:
                return {"state": "DEAD", "type": "UNKNOWN", "members": []}
            # a new cluster creates __consumer_offsets on first use; a moving coordinator answers the same way
            if code not in _RETRY_DESCRIBE or time.monotonic() >= deadline:
                raise MigrationError(f"describing group {group!r} failed: {exc.args[0].str()}") from exc
            time.sleep(0.5)
    kind = getattr(found.type, "name", str(found.type))
    members = []
    for m in found.members:
        target = m.target_assignment
        classic = kind == "CLASSIC" or m.member_id.startswith(f"{m.client_id}-")
        members.append({"client_id": m.client_id, "member_id": m.member_id,
                        "protocol": "classic" if classic else "consumer",
                        "assignment": sorted(tp.partition for tp in m.assignment.topic_partitions),
                        "target": None if target is None else sorted(tp.partition for tp in target.topic_partitions)})
    return {"state": getattr(found.state, "name", str(found.state)), "type": kind,
            "assignor": found.partition_assignor, "members": members}


# ----- the service under test: instances, traffic, what was consumed -----

class Ledger:
    """Records acknowledged by the producer and records consumed, as (partition, offset); thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.produced: set[tuple[int, int]] = set()
        self.consumed: Counter[tuple[int, int]] = Counter()
        self.produce_errors = 0

    def ack(self, partition: int, offset: int) -> None:
        with self._lock:
            self.produced.add((partition, offset))

    def consume(self, partition: int, offset: int) -> None:
        with self._lock:
            self.consumed[(partition, offset)] += 1

    def unconsumed(self) -> int:
        with self._lock:
            return len(self.produced - set(self.consumed))

    def summary(self) -> dict:
        with self._lock:
            return {"produced": len(self.produced), "consumed": len(set(self.consumed) & self.produced),
                    "unconsumed": len(self.produced - set(self.consumed)),
                    "consumed_twice": sum(1 for k, c in self.consumed.items() if c > 1 and k in self.produced),
                    "produce_errors": self.produce_errors}


class Recorder:
    """Rebalance events of every instance on one monotonic clock (seconds since the run started)."""

    def __init__(self) -> None:
        self.t0 = time.monotonic()
        self._lock = threading.Lock()
        self.events: list[RebalanceEvent] = []

    def now(self) -> float:
        return time.monotonic() - self.t0

    def record(self, instance: str, lane: Lane, kind: EventKind, partitions: list[int] | tuple[int, ...] = ()) -> None:
        with self._lock:
            self.events.append(RebalanceEvent(self.now(), instance, lane, kind, tuple(sorted(partitions))))

    def last_at(self) -> float:
        with self._lock:
            return self.events[-1].at if self.events else 0.0


class Instance:
    """One incarnation of one service instance: a subscribed consumer polled by its own thread. Offsets are stored
    after processing and committed by auto-commit, on revocation and on close (at least once)."""

    def __init__(self, fleet: Fleet, name: str, protocol: Protocol, incarnation: int):
        self.fleet, self.name, self.protocol = fleet, name, protocol
        self.lane: Lane = client_lane(name)
        self.key = f"{name}#{incarnation}"
        spec = fleet.spec
        config: dict[str, Any] = {**spec.connection(), "group.id": spec.group, "client.id": name,
                                  "group.protocol": protocol, "enable.auto.offset.store": False,
                                  "auto.offset.reset": "earliest", "logger": QUIET_LOGGER}
        if protocol == "classic" and spec.classic_assignor:
            config["partition.assignment.strategy"] = spec.classic_assignor
        if protocol == "consumer" and spec.remote_assignor:
            config["group.remote.assignor"] = spec.remote_assignor
        self.consumer = Consumer(config)
        self.observer = ClientObserver(fleet.sink, fleet.run_id, name, self.lane)
        self.assignment: set[int] = set()
        self.error: str | None = None
        self.processed = 0
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name=f"migration-{self.key}", daemon=True)

    def start(self) -> Instance:
        self.consumer.subscribe([self.fleet.spec.topic], on_assign=self._assigned, on_revoke=self._revoked,
                                on_lost=self._lost)
        self.thread.start()
        return self

    def _assigned(self, _consumer: Consumer, parts: list[TP]) -> None:
        self.assignment |= {tp.partition for tp in parts}
        self.fleet.recorder.record(self.key, self.lane, "assigned", [tp.partition for tp in parts])

    def _revoked(self, consumer: Consumer, parts: list[TP]) -> None:
        if parts:
            with contextlib.suppress(KafkaException):  # nothing stored yet (_NO_OFFSET): nothing to hand over
                consumer.commit(asynchronous=False)
        self.assignment -= {tp.partition for tp in parts}
        self.fleet.recorder.record(self.key, self.lane, "revoked", [tp.partition for tp in parts])

    def _lost(self, _consumer: Consumer, parts: list[TP]) -> None:
        self.assignment -= {tp.partition for tp in parts}
        self.fleet.recorder.record(self.key, self.lane, "lost", [tp.partition for tp in parts])

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                msg = self.consumer.poll(0.2)
                if msg is None:
                    continue
                if msg.error() is not None:
                    if msg.error().fatal():
                        raise KafkaException(msg.error())
                    continue
                self._process(msg)
        except Exception as exc:  # reported by the fleet's stability checks, never lost in a thread
            self.error = f"{type(exc).__name__}: {exc}"
            log.error("migration instance %s failed: %s", self.key, self.error)

    def _process(self, msg: Message) -> None:
        received = int(time.time() * 1000)
        started = time.perf_counter()
        int(msg.value() or b"0")  # the service's work: parse the record
        elapsed_ms = (time.perf_counter() - started) * 1000
        partition, offset = msg.partition(), msg.offset()
        self.fleet.ledger.consume(partition, offset)
        self.processed += 1
        if self.fleet.observing:
            lag = None
            with contextlib.suppress(KafkaException, RuntimeError):
                _, high = self.consumer.get_watermark_offsets(TP(msg.topic(), partition), cached=True)
                lag = max(0, high - offset - 1) if high is not None and high >= 0 else None
            kind, ts = msg.timestamp()
            send_ts = ts if kind != TIMESTAMP_NOT_AVAILABLE and ts > 0 else received
            self.observer.processed(msg.topic(), partition, None, offset, send_ts, received, elapsed_ms, lag, None)
        with contextlib.suppress(KafkaException):  # revoked meanwhile: its next owner reads it again
            self.consumer.store_offsets(message=msg)

    def close(self) -> None:
        """Stops polling, then closes cleanly: revocation commits what was processed, and the member leaves."""
        self.fleet.recorder.record(self.key, self.lane, "closing")
        self._stop.set()
        self.thread.join(timeout=30)
        try:
            self.consumer.close()
        except (KafkaException, RuntimeError) as exc:
            log.warning("migration instance %s: close: %s", self.key, exc)


class Fleet:
    """The service's instances (one live incarnation per name). `switch` is idempotent: an instance already running
    on the protocol asked for is left alone."""

    def __init__(self, spec: MigrationSpec, partitions: list[int], sink: ObservationSink, run_id: str):
        self.spec, self.partitions, self.sink, self.run_id = spec, partitions, sink, run_id
        self.recorder, self.ledger = Recorder(), Ledger()
        self.live: dict[str, Instance] = {}
        self.incarnations: Counter[str] = Counter()
        self.observing = False
        self._admin = AdminClient({**spec.connection(), "logger": QUIET_LOGGER})

    def start(self, name: str, protocol: Protocol) -> Instance:
        self.incarnations[name] += 1
        self.live[name] = Instance(self, name, protocol, self.incarnations[name]).start()
        return self.live[name]

    def stop(self, name: str) -> None:
        instance = self.live.pop(name, None)
        if instance is not None:
            instance.close()

    def switch(self, name: str, protocol: Protocol) -> bool:
        """`name` on `protocol`: closed cleanly (committing) and started again when it ran another; True if changed."""
        current = self.live.get(name)
        if current is not None and current.protocol == protocol and current.error is None:
            return False
        self.stop(name)
        self.start(name, protocol)
        return True

    def protocols(self) -> dict[str, str]:
        return {name: i.protocol for name, i in sorted(self.live.items())}

    def unsettled(self, quiet_s: float = 4.0) -> str | None:
        """Why the group is not settled yet, or None: every live instance healthy and holding a partition, every
        partition held exactly once, no callback for `quiet_s`, and the coordinator agrees (stable, members'
        assignments at their targets)."""
        failed = [f"{i.key}: {i.error}" for i in self.live.values() if i.error]
        if failed:
            raise MigrationError(f"instance(s) failed: {'; '.join(failed)}")
        held = Counter(p for i in self.live.values() for p in i.assignment)
        if sorted(held) != self.partitions or any(c > 1 for c in held.values()):
            return f"partitions held {dict(sorted(held.items()))}, want each of {self.partitions} once"
        idle = [n for n, i in self.live.items() if not i.assignment]
        if idle:
            return f"instances without a partition: {idle}"
        if self.recorder.now() - self.recorder.last_at() < quiet_s:
            return "rebalancing"
        group = describe_group(self._admin, self.spec.group, 15.0)
        if group["state"] != "STABLE" or len(group["members"]) != len(self.live):
            return f"coordinator: group {group['state']} with {len(group['members'])} member(s)"
        moving = [m["client_id"] for m in group["members"] if m["target"] is not None and m["target"] !=
                  m["assignment"]]
        return f"coordinator: {moving} not at their target assignment" if moving else None

    def settle(self, what: str) -> float:
        """Waits until the group is settled; returns the seconds it took. Raises MigrationError on timeout."""
        started = time.monotonic()
        deadline = started + self.spec.settle_timeout_s
        why: str | None = "not checked"
        while time.monotonic() < deadline:
            why = self.unsettled()
            if why is None:
                return round(time.monotonic() - started, 2)
            time.sleep(0.5)
        raise MigrationError(f"the group did not settle after {what} within {self.spec.settle_timeout_s:g}s: {why}")

    def close(self) -> None:
        for name in list(self.live):
            self.stop(name)


class Traffic:
    """Steady traffic: `rate` records/s over every partition in turn, each acknowledgement in the ledger."""

    def __init__(self, spec: MigrationSpec, partitions: list[int], ledger: Ledger):
        self.spec, self.partitions, self.ledger = spec, partitions, ledger
        self.producer = Producer({**PRODUCER_DEFAULTS, **spec.connection(), "acks": "all", "linger.ms": 5,
                                  "logger": QUIET_LOGGER})
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="migration-traffic", daemon=True)

    def _delivered(self, err: KafkaError | None, msg: Message) -> None:
        if err is None:
            self.ledger.ack(msg.partition(), msg.offset())
        else:
            self.ledger.produce_errors += 1

    def _run(self) -> None:
        n, started = 0, time.monotonic()
        while not self._stop.is_set():
            with contextlib.suppress(BufferError):
                self.producer.produce(self.spec.topic, str(n).encode(),
                                      partition=self.partitions[n % len(self.partitions)], on_delivery=self._delivered)
                n += 1
            self.producer.poll(0)
            self._stop.wait(max(0.0, started + n / self.spec.rate - time.monotonic()))

    def start(self) -> Traffic:
        self.thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self.thread.join(timeout=10)
        left = self.producer.flush(30)
        if left:
            log.warning("migration traffic: %d record(s) not acknowledged at the end", left)


# ----- 4. judge -----

def judge_config(path: str | None = None) -> JudgeConfig:
    """The migration's judge settings: lag_p99 and processing_latency_p99 only (data required, 100 samples per lane),
    short buckets for a short window; a YAML file at `path` is merged over them (its metrics per name)."""
    metrics: dict[str, dict] = {m.name: {"enabled": False} for m in DEFAULT_METRICS if m.name not in JUDGED}
    metrics.update({name: {"must_have_data": True, "min_samples": 100} for name in JUDGED})
    data: dict[str, Any] = {"warmup_s": 5, "bucket_s": 5, "min_buckets": 3}
    if path:
        try:
            given = yaml.safe_load(Path(path).read_text()) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise MigrationError(f"cannot read judge config {path}: {exc}") from exc
        if not isinstance(given, dict):
            raise MigrationError(f"judge config {path} must be a YAML mapping")
        for name, fields in (given.pop("metrics", None) or {}).items():
            metrics[name] = {**metrics.get(name, {}), **(fields or {})}
        data.update(given)
    return config_from_dict({**data, "metrics": metrics})


def judge_observations(path: Path, out_dir: Path, config: JudgeConfig) -> dict:
    """The judge's verdict on the window's observations file (the reader the rollout and the Spark job share),
    written to out_dir/verdict.json."""
    parsed, bad = read_file_counted(path)
    verdict = judge(Aggregates.from_observations(parsed, int(config.bucket_s * 1000), bad), config, final=True)
    (out_dir / "verdict.json").write_text(json.dumps(verdict, indent=2))
    return verdict


def _metric_summary(verdict: dict) -> dict:
    return {m["name"]: {"decision": m["decision"], "reason": m["reason"], "canary": m["canary"].get("value"),
                        "baseline": m["baseline"].get("value")} for m in verdict["metrics"]}


# ----- 5. promote, rollback, verify -----

def promote(fleet: Fleet) -> dict:
    """Baseline instances to `consumer`, one at a time, each after the group settled again. Idempotent."""
    return _move(fleet, [n for n in fleet.spec.names if client_lane(n) == "baseline"], "consumer")


def rollback(fleet: Fleet) -> dict:
    """Canary instances back to `classic`, one at a time. Idempotent."""
    return _move(fleet, [n for n in fleet.spec.names if client_lane(n) == "canary"], "classic")


def _move(fleet: Fleet, names: list[str], protocol: Protocol) -> dict:
    switched, settled = [], {}
    for name in names:
        if fleet.switch(name, protocol):
            switched.append(name)
            settled[name] = fleet.settle(f"{name} switched to {protocol}")
    return {"protocol": protocol, "switched": switched, "settled_s": settled}


def verify(fleet: Fleet, promised: dict[str, str], drain_timeout: float = 60.0) -> dict:
    """Every instance on its promised protocol (our configs and the coordinator's member ids), the group stable, and
    every acknowledged record consumed at least once (waits up to `drain_timeout` for the consumers to catch up)."""
    problems = []
    deadline = time.monotonic() + drain_timeout
    while fleet.ledger.unconsumed() and time.monotonic() < deadline:
        time.sleep(0.5)
    why = fleet.unsettled()
    if why:
        problems.append(f"group not settled: {why}")
    group = describe_group(fleet._admin, fleet.spec.group, 15.0)
    ours = fleet.protocols()
    if ours != promised:
        problems.append(f"instances run {ours}, promised {promised}")
    seen = {m["client_id"]: m["protocol"] for m in group["members"]}
    if seen != promised:
        problems.append(f"the coordinator sees {seen}, promised {promised}")
    counts = fleet.ledger.summary()
    if counts["unconsumed"]:
        problems.append(f"{counts['unconsumed']} of {counts['produced']} acknowledged records never consumed")
    return {"ok": not problems, "problems": problems, "protocols": ours, "group": group, "records": counts}


# ----- the whole canary -----

def run_migration(spec: MigrationSpec) -> dict:
    """Preflight, window, judge, promote or roll back, verify. Returns the result (also out_dir/result.json).
    Raises MigrationRefused before anything started, MigrationError when a step fails (every instance is closed
    and the producer stopped either way)."""
    spec.validate()
    out = Path(spec.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    try:
        checked = preflight(spec)
    except MigrationRefused as exc:
        _write(out / "result.json", {"verdict": None, "refused": str(exc)})
        raise
    run_id = f"migration-{uuid.uuid4().hex[:8]}"
    observations = out / "observations.jsonl"
    observations.unlink(missing_ok=True)
    sink = ObservationSink(None, None, path=observations)
    partitions = topic_partitions(AdminClient({**spec.connection(), "logger": QUIET_LOGGER}), spec.topic, 30.0) or []
    fleet = Fleet(spec, partitions, sink, run_id)
    traffic: Traffic | None = None
    result: dict[str, Any] = {"run_id": run_id, "spec": _spec_dict(spec), "preflight": checked}
    try:
        # 2. baseline instances on classic first (the service as it runs today), then the canary joins
        for name in spec.names:
            if client_lane(name) == "baseline":
                fleet.start(name, "classic")
        result["baseline_settled_s"] = fleet.settle("the baseline instances joined")
        for name in spec.names:
            if client_lane(name) == "canary":
                fleet.start(name, "consumer")
        result["canary_settled_s"] = fleet.settle("the canary instances joined")
        result["group_at_start"] = describe_group(fleet._admin, spec.group, 15.0)
        # 3. the compared window: steady traffic, one baseline instance restarts
        traffic = Traffic(spec, partitions, fleet.ledger).start()
        fleet.observing = True
        start = fleet.recorder.now()
        time.sleep(spec.disturb_at_s)
        disturbed = spec.names[0]
        fleet.stop(disturbed)
        time.sleep(spec.restart_gap_s)
        fleet.start(disturbed, "classic")
        settled = fleet.settle(f"{disturbed} restarted")
        time.sleep(max(0.0, start + spec.window_s - fleet.recorder.now()))
        end = fleet.recorder.now()
        fleet.observing = False
        sink.close()
        rejoined = any(e.instance == fleet.live[disturbed].key and e.kind == "assigned" and e.partitions
                       for e in fleet.recorder.events)
        result["window"] = {"start_s": round(start, 2), "end_s": round(end, 2), "disturbance": {
            "instance": disturbed, "restarted_at_s": round(start + spec.disturb_at_s, 2), "rejoined": rejoined,
            "settled_s": settled}}
        # 4. judge
        slots = Counter(client_lane(n) for n in spec.names)
        disruption = compare(account(fleet.recorder.events, start, end, dict(slots)), int(rejoined))
        judged = judge_observations(observations, out, judge_config(spec.judge_config))
        verdict, reason = combine(disruption, judged)
        result.update(verdict=verdict, reason=reason, disruption=disruption,
                      judge={"verdict": judged["verdict"], "reason": judged["reason"],
                             "metrics": _metric_summary(judged), "file": str(out / "verdict.json")})
        _write(out / "events.jsonl", None, lines=[e.to_dict() for e in fleet.recorder.events])
        _write(out / "result.json", result)
        log.info("migration canary %s: %s (%s)", run_id, verdict, reason)
        # 5. promote or roll back, while the traffic goes on, then verify
        do = spec.action if spec.action != "auto" else ("promote" if verdict == PROMOTE else "rollback")
        result["action"] = promote(fleet) if do == "promote" else rollback(fleet)
        result["action"]["name"] = do
        traffic.stop()
        traffic = None
        # promote leaves every instance on consumer, rollback every instance on classic
        want = "consumer" if do == "promote" else "classic"
        result["verify"] = verify(fleet, {n: want for n in sorted(spec.names)})
        _write(out / "result.json", result)
        if not result["verify"]["ok"]:
            raise MigrationError(f"{do} did not reach the promised state: {'; '.join(result['verify']['problems'])}"
                                 f" (see {out / 'result.json'})")
        return result
    finally:
        if traffic is not None:
            traffic.stop()
        fleet.close()
        sink.close()


def _spec_dict(spec: MigrationSpec) -> dict:
    d = asdict(spec)
    d["out_dir"] = str(spec.out_dir)
    d["client"] = redacted(spec.client)  # the one secret rule: every secret-named setting masked
    return d


def _write(path: Path, data: object, lines: list[dict] | None = None) -> None:
    text = "".join(json.dumps(x) + "\n" for x in lines) if lines is not None else json.dumps(data, indent=2)
    path.write_text(text)


# ----- CLI -----

def register(sub) -> None:
    p = sub.add_parser("migrate-protocol", help="KIP-848 migration canary: canary instances of a consumer service on "
                                                "group.protocol=consumer first, compared, then promoted or rolled back",
                       description=__doc__.split("\n\n")[0])
    p.add_argument("--bootstrap-servers", required=True)
    p.add_argument("--topic", required=True, help="the service's topic (must exist)")
    p.add_argument("--group", required=True, help="the service's group id (must have no other member)")
    p.add_argument("--out", type=Path, required=True, help="output directory: result.json, verdict.json, events")
    p.add_argument("--baseline", type=int, default=3, help="baseline instances on classic (default 3)")
    p.add_argument("--canary", type=int, default=1, help="canary instances on consumer (default 1)")
    p.add_argument("--rate", type=float, default=40.0, help="records/s of steady traffic (default 40)")
    p.add_argument("--window", type=float, default=60.0, help="compared window in seconds (default 60)")
    p.add_argument("--disturb-at", type=float, default=20.0, help="seconds into the window when a baseline "
                                                                  "instance restarts (default 20)")
    p.add_argument("--classic-assignor", help="partition.assignment.strategy of classic instances (default "
                                              "librdkafka's range,roundrobin)")
    p.add_argument("--remote-assignor", choices=("uniform", "range"), help="server-side assignor (default: broker's)")
    p.add_argument("--client-config", type=Path, help="JSON file of librdkafka connection/security settings")
    p.add_argument("--action", choices=("auto", "promote", "rollback"), default="auto",
                   help="after the verdict: auto (promote on PROMOTE, else roll back; default), or a person's choice")
    p.add_argument("--judge-config", help="YAML merged over the migration's judge settings")
    p.add_argument("--json", action="store_true", help="print the whole result as JSON")
    p.set_defaults(func=cmd_migrate_protocol)


def cmd_migrate_protocol(args: argparse.Namespace) -> int:
    client = json.loads(args.client_config.read_text()) if args.client_config else {}
    spec = MigrationSpec(bootstrap_servers=args.bootstrap_servers, topic=args.topic, group=args.group,
                         out_dir=args.out, baseline=args.baseline, canary=args.canary, rate=args.rate,
                         window_s=args.window, disturb_at_s=args.disturb_at, classic_assignor=args.classic_assignor,
                         remote_assignor=args.remote_assignor, client=client, action=args.action,
                         judge_config=args.judge_config)
    result = run_migration(spec)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(summary(result))
    return EXIT_CODES[result["verdict"]]


def summary(result: dict) -> str:
    """A few lines a person reads: verdict, per-lane disruption, lag, the action and what was consumed."""
    lines = [f"verdict {result['verdict']}: {result['reason']}"]
    for lane, d in result["disruption"]["lanes"].items():
        per = d["per_instance"]
        lines.append(f"  {lane:<8} ({d['slots']} instance(s)) per instance: {per['revoked']:g} revoked, "
                     f"{per['needless']:g} needlessly, {per['pause_s']:g}s without partitions, "
                     f"{per['callbacks']:g} callbacks")
    for name, m in result["judge"]["metrics"].items():
        lines.append(f"  {name}: canary {m['canary']} vs baseline {m['baseline']} ({m['decision']})")
    action, records = result["action"], result["verify"]["records"]
    lines.append(f"{action['name']}: switched {action['switched'] or 'nothing'} to {action['protocol']}; verified "
                 f"{'OK' if result['verify']['ok'] else 'NOT OK'}; {records['consumed']} of {records['produced']} "
                 f"records consumed ({records['consumed_twice']} twice)")
    return "\n".join(lines)
