"""One group member of the service stand-in: an instance incarnation, a subscribed librdkafka consumer polled by
its own thread (its own connections and group membership, so the broker sees separate members as with separate
processes). A restarted or re-configured instance is a new incarnation (`<name>#<n>`) with the same client id."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from typing import TYPE_CHECKING, Any

from confluent_kafka import TIMESTAMP_NOT_AVAILABLE, Consumer, KafkaError, KafkaException, Message, TopicPartition

from canary.clients.observe import ClientObserver
from canary.kafka.clients import QUIET_LOGGER
from canary.lanes import client_lane
from canary.observations import Lane

if TYPE_CHECKING:
    from canary.rollout.migration.fleet import Fleet
    from canary.rollout.migration.spec import MigrationSpec, Protocol

log = logging.getLogger(__name__)


def consumer_config(spec: MigrationSpec, name: str, protocol: Protocol) -> dict[str, Any]:
    """An instance's consumer settings: offsets stored after processing and committed by auto-commit, on
    revocation and on close (at least once); the assignor the spec names for the protocol."""
    config: dict[str, Any] = {**spec.connection(), "group.id": spec.group, "client.id": name,
                              "group.protocol": protocol, "enable.auto.offset.store": False,
                              "auto.offset.reset": "earliest", "logger": QUIET_LOGGER}
    if protocol == "classic" and spec.classic_assignor:
        config["partition.assignment.strategy"] = spec.classic_assignor
    if protocol == "consumer" and spec.remote_assignor:
        config["group.remote.assignor"] = spec.remote_assignor
    return config


class MemberThread:
    """One incarnation of one service instance: a subscribed consumer polled by its own thread. Its rebalance
    callbacks go to the fleet's recorder, its consumed records to the fleet's delivery ledger, and (while the fleet
    is observing) one observation per record to the fleet's sink."""

    def __init__(self, fleet: Fleet, name: str, protocol: Protocol, incarnation: int):
        self.fleet, self.name, self.protocol = fleet, name, protocol
        self.lane: Lane = client_lane(name)
        self.key = f"{name}#{incarnation}"
        self.consumer = Consumer(consumer_config(fleet.spec, name, protocol))
        self.observer = ClientObserver(fleet.sink, fleet.run_id, name, self.lane)
        self.assignment: set[int] = set()
        self.error: str | None = None
        self.processed = 0
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._poll_until_stopped, name=f"migration-{self.key}", daemon=True)

    def start(self) -> MemberThread:
        self.consumer.subscribe([self.fleet.spec.topic], on_assign=self._assigned, on_revoke=self._revoked,
                                on_lost=self._lost)
        self.thread.start()
        return self

    def _assigned(self, _consumer: Consumer, parts: list[TopicPartition]) -> None:
        self.assignment |= {tp.partition for tp in parts}
        self.fleet.recorder.record(self.key, self.lane, "assigned", [tp.partition for tp in parts])

    def _revoked(self, consumer: Consumer, parts: list[TopicPartition]) -> None:
        if parts:
            with contextlib.suppress(KafkaException):  # nothing stored yet (_NO_OFFSET): nothing to hand over
                consumer.commit(asynchronous=False)
        self.assignment -= {tp.partition for tp in parts}
        self.fleet.recorder.record(self.key, self.lane, "revoked", [tp.partition for tp in parts])

    def _lost(self, _consumer: Consumer, parts: list[TopicPartition]) -> None:
        self.assignment -= {tp.partition for tp in parts}
        self.fleet.recorder.record(self.key, self.lane, "lost", [tp.partition for tp in parts])

    def _poll_until_stopped(self) -> None:
        try:
            while not self._stop.is_set():
                msg = self.consumer.poll(0.2)
                if msg is None:
                    continue
                error = msg.error()
                if error is not None:
                    if error.fatal():
                        raise KafkaException(error)
                    continue
                self._process(msg)
        except Exception as exc:  # reported by the fleet's stability checks, never lost in a thread
            self.error = f"{type(exc).__name__}: {exc}"
            log.error("migration instance %s failed: %s", self.key, self.error)

    def _process(self, msg: Message) -> None:
        received_ms = int(time.time() * 1000)
        started = time.perf_counter()
        int(msg.value() or b"0")  # the service's work: parse the record
        elapsed_ms = (time.perf_counter() - started) * 1000
        topic, partition, offset = _coordinates(msg)
        self.fleet.ledger.consume(partition, offset)
        self.processed += 1
        if self.fleet.observing:
            self._observe(msg, (topic, partition, offset), received_ms, elapsed_ms)
        with contextlib.suppress(KafkaException):  # revoked meanwhile: its next owner reads it again
            self.consumer.store_offsets(message=msg)

    def _observe(self, msg: Message, where: tuple[str, int, int], received_ms: int, elapsed_ms: float) -> None:
        """One observation of the processed record: its lag behind the partition's end and its processing time."""
        topic, partition, offset = where
        lag = None
        with contextlib.suppress(KafkaException, RuntimeError):
            _, high = self.consumer.get_watermark_offsets(TopicPartition(topic, partition), cached=True)
            lag = max(0, high - offset - 1) if high is not None and high >= 0 else None
        timestamp_type, timestamp = msg.timestamp()
        send_ts = timestamp if timestamp_type != TIMESTAMP_NOT_AVAILABLE and timestamp > 0 else received_ms
        self.observer.processed(topic, partition, None, offset, send_ts, received_ms, elapsed_ms, lag, None)

    def close(self) -> None:
        """Stops polling, then closes cleanly: revocation commits what was processed, and the member leaves."""
        self.fleet.recorder.record(self.key, self.lane, "closing")
        self._stop.set()
        self.thread.join(timeout=30)
        try:
            self.consumer.close()
        except (KafkaException, RuntimeError) as exc:
            log.warning("migration instance %s: close: %s", self.key, exc)


def _coordinates(msg: Message) -> tuple[str, int, int]:
    """Topic, partition and offset of a consumed record (librdkafka sets them on every record without an error)."""
    topic, partition, offset = msg.topic(), msg.partition(), msg.offset()
    if topic is None or partition is None or offset is None:
        raise KafkaException(KafkaError(KafkaError._BAD_MSG, "a record without topic, partition or offset"))
    return topic, partition, offset
