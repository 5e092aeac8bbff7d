"""A subscribed consumer that the KIP-848 migration canary can judge (docs/migration-canary.md): GroupMember wraps
the service's own `confluent_kafka.Consumer` in its group, subscribed as usual (no lanes: under KIP-848 the broker
assigns), and records what the canary compares:

- every rebalance callback that carries partitions, and the moment it begins to close, one JSON line each in the
  file the migration canary gives (`$KAFKA_CANARY_REBALANCES`): `at_ms` (wall clock; the instances run on the
  canary's host), `instance` (`<client.id>#<pid>`: a restarted process is a new incarnation), `lane` (from the
  client id), `kind` (assigned, revoked, lost, closing), `partitions`;
- one observation per processed record (kind "client": processing time, lag), as LaneConsumer writes them.

    member = GroupMember.from_contract()          # the contract's settings, group.protocol included
    member.subscribe()
    for msg in member.messages(stop):
        with member.processing(msg):              # timed; the offset is stored only when handle() returned
            handle(msg)
    member.close()                                # commits what was processed, leaves the group

A service in another language reports nothing through it; the canary then says the disruption was not compared.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from confluent_kafka import TIMESTAMP_NOT_AVAILABLE, Consumer, KafkaException, Message, TopicPartition

from canary.clients.deployer import CONTRACT
from canary.clients.observe import ClientObserver, open_sink, run_id_for
from canary.kafka.clients import QUIET_LOGGER, position
from canary.lanes import client_lane

log = logging.getLogger(__name__)


def contract_settings(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """librdkafka settings of a migration canary instance, from the contract in its environment: the connection
    file, bootstrap servers, group, client id, group.protocol and the assignor for it; offsets stored after
    processing (committed by auto-commit, on revocation and on close: at least once)."""
    env = os.environ if environ is None else environ

    def given(key: str) -> str:
        return env.get(CONTRACT[key], "")

    settings: dict[str, Any] = json.loads(Path(given("client_config")).read_text()) if given("client_config") else {}
    settings |= {"bootstrap.servers": given("bootstrap"), "group.id": given("group"), "client.id": given("id"),
                 "enable.auto.offset.store": False, "auto.offset.reset": "earliest", "logger": QUIET_LOGGER}
    protocol = given("group_protocol") or "classic"
    settings["group.protocol"] = protocol
    if given("assignor"):
        settings["partition.assignment.strategy" if protocol == "classic" else "group.remote.assignor"] = \
            given("assignor")
    return settings


class GroupMember:
    """One incarnation of a subscribed instance. `rebalances`: the callbacks file (None: none written);
    `observations`: True writes processed observations to the cluster's observations topic under `run_id`
    ($KAFKA_CANARY_RUN_ID by default)."""

    def __init__(self, config: Mapping[str, Any], topics: list[str], *, rebalances: str | Path | None = None,
                 observations: bool = False, run_id: str | None = None):
        self.config, self.topics = dict(config), list(topics)
        self.name = str(self.config.get("client.id") or "consumer")
        self.lane = client_lane(self.name)
        self.key = f"{self.name}#{os.getpid()}"
        self.consumer = Consumer(self.config)
        self._log = open(rebalances, "a", buffering=1) if rebalances else None  # noqa: SIM115 - closed in close()
        self._lock = threading.Lock()
        self.observer: ClientObserver | None = None
        if observations:
            sink, _ = open_sink(True, self.config, None)
            self.observer = ClientObserver(sink, run_id_for(run_id), self.name, self.lane)
        self.processed = 0

    @classmethod
    def from_contract(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> GroupMember:
        """The instance the migration canary started: its settings, topic, callbacks file and run id from the
        contract; `overrides` go over the settings."""
        env = os.environ if environ is None else environ
        return cls(contract_settings(env) | overrides, [env[CONTRACT["topic"]]],
                   rebalances=env.get(CONTRACT["rebalances"]) or None, observations=True,
                   run_id=env.get(CONTRACT["run_id"]))

    def record(self, kind: str, partitions: list[TopicPartition] | tuple = ()) -> None:
        """One line of the callbacks file (none without one)."""
        if self._log is None:
            return
        line = {"at_ms": time.time() * 1000, "instance": self.key, "lane": self.lane, "kind": kind,
                "partitions": sorted(tp.partition for tp in partitions)}
        with self._lock:
            self._log.write(json.dumps(line, separators=(",", ":")) + "\n")

    def subscribe(self) -> None:
        self.consumer.subscribe(self.topics, on_assign=self._assigned, on_revoke=self._revoked, on_lost=self._lost)

    def _assigned(self, _consumer: Consumer, parts: list[TopicPartition]) -> None:
        self.record("assigned", parts)

    def _revoked(self, consumer: Consumer, parts: list[TopicPartition]) -> None:
        if parts:
            with contextlib.suppress(KafkaException):  # nothing stored yet (_NO_OFFSET): nothing to hand over
                consumer.commit(asynchronous=False)
        self.record("revoked", parts)

    def _lost(self, _consumer: Consumer, parts: list[TopicPartition]) -> None:
        self.record("lost", parts)

    def messages(self, stop: threading.Event, timeout: float = 0.2) -> Iterator[Message]:
        """Records until `stop` is set; errors that are not fatal are skipped (the client retries them)."""
        while not stop.is_set():
            msg = self.consumer.poll(timeout)
            if msg is None:
                continue
            error = msg.error()
            if error is not None:
                if error.fatal():
                    raise KafkaException(error)
                continue
            yield msg

    @contextlib.contextmanager
    def processing(self, msg: Message) -> Iterator[None]:
        """Times the caller's processing of `msg` and observes it; stores its offset only when processing returned
        (a record that raised is not committed, and the exception goes on)."""
        received_ms = time.time() * 1000
        started = time.perf_counter()
        error: str | None = None
        try:
            yield
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
            raise
        finally:
            self._observe(msg, received_ms, (time.perf_counter() - started) * 1000, error)
        self.processed += 1
        with contextlib.suppress(KafkaException):  # revoked meanwhile: its next owner reads it again
            self.consumer.store_offsets(message=msg)

    def _observe(self, msg: Message, received_ms: float, elapsed_ms: float, error: str | None) -> None:
        if self.observer is None:
            return
        topic, partition, offset = position(msg)
        lag = None
        with contextlib.suppress(KafkaException, RuntimeError):
            _, high = self.consumer.get_watermark_offsets(TopicPartition(topic, partition), cached=True)
            lag = max(0, high - offset - 1) if high is not None and high >= 0 else None
        timestamp_type, timestamp = msg.timestamp()
        send_ts = timestamp if timestamp_type != TIMESTAMP_NOT_AVAILABLE and timestamp > 0 else received_ms
        self.observer.processed(topic, partition, None, offset, send_ts, received_ms, elapsed_ms, lag, error)

    def close(self) -> None:
        """Records that it begins to close (its own revocation is not a disruption), then closes the consumer
        (revocation commits what was processed; it leaves the group) and flushes its observations."""
        self.record("closing")
        try:
            self.consumer.close()
        except (KafkaException, RuntimeError) as exc:  # closed already, or the cluster is gone: nothing to keep
            log.warning("group member %s: close: %s", self.key, exc)
        finally:
            if self.observer is not None:
                self.observer.sink.close()
            if self._log is not None:
                self._log.close()
