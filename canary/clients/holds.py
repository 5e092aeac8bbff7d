"""The records a lane consumer holds: a partition paused at a record whose processing failed, rewound to it and
retried after a backoff (0.1 s, doubling to 0.5 s) until it succeeds or the partition leaves the lane. The canary
lane holds what the fleet wrote, so a version on trial never commits past what it could not process
(canary.clients.consumer)."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaException, Message
from confluent_kafka import TopicPartition as TP

from canary.kafka.clients import position

# The consumer's own logger: a hold is the lane consumer's doing, logged as the rest of what it does.
log = logging.getLogger("canary.clients.consumer")

Partition = tuple[str, int]
RETRY_FIRST_S, RETRY_MAX_S = 0.1, 0.5  # a held record's retries: often enough that the judge sees the errors


@dataclass
class Held:
    """A partition paused at a record whose processing failed."""
    offset: int
    retry_at: float      # monotonic seconds
    attempts: int
    resumed: bool = False


class HeldRecords(Mapping[Partition, Held]):
    """The held partitions of one consumer (`client`: its confluent_kafka.Consumer), each at its held record."""

    def __init__(self, client: Any, client_id: str):
        self._client = client
        self._client_id = client_id
        self._held: dict[Partition, Held] = {}

    def __getitem__(self, key: Partition) -> Held:
        return self._held[key]

    def __iter__(self) -> Iterator[Partition]:
        return iter(self._held)

    def __len__(self) -> int:
        return len(self._held)

    def hold(self, msg: Message) -> None:
        """Pauses `msg`'s partition and rewinds it to `msg`, to be retried after a backoff (retry_due)."""
        topic, partition, offset = position(msg)
        key = (topic, partition)
        before = self._held.get(key)
        attempts = before.attempts + 1 if before is not None and before.offset == offset else 1
        delay = min(RETRY_MAX_S, RETRY_FIRST_S * 2 ** (attempts - 1))
        self._held[key] = Held(offset, time.monotonic() + delay, attempts)
        tp = TP(topic, partition, offset)
        with contextlib.suppress(KafkaException):  # released meanwhile: its next owner starts at the commit
            self._client.pause([tp])
            self._client.seek(tp)
        if attempts == 1:
            log.warning("lane consumer %s: %s-%d held at offset %d, whose processing failed; retried until it "
                        "succeeds or the partition goes to another instance", self._client_id, topic, partition,
                        offset)

    def retry_due(self) -> None:
        """Resumes the held partitions whose retry is due, at their held record."""
        now = time.monotonic()
        for (topic, partition), held in list(self._held.items()):
            if held.retry_at <= now and not held.resumed:
                tp = TP(topic, partition, held.offset)
                with contextlib.suppress(KafkaException):
                    self._client.seek(tp)
                    self._client.resume([tp])
                held.resumed = True

    def poll_timeout(self, timeout: float) -> float:
        """`timeout`, cut short to wake for the next retry."""
        waiting = [h.retry_at for h in self._held.values() if not h.resumed]
        if waiting:
            timeout = max(0.0, min(timeout, min(waiting) - time.monotonic()))
        return timeout

    def drops(self, key: Partition, offset: int) -> bool:
        """Whether a record fetched at `offset` of a held partition is dropped: fetched before the hold, or past
        the held record (then the rewind did not take, and is asked again)."""
        held = self._held.get(key)
        if held is None or (held.resumed and offset == held.offset):
            return False
        if held.resumed:
            with contextlib.suppress(KafkaException):
                self._client.seek(TP(key[0], key[1], held.offset))
        return True

    def blocks(self, key: Partition, offset: int) -> bool:
        """Whether storing `offset` would go past the partition's held record."""
        held = self._held.get(key)
        return held is not None and offset >= held.offset

    def at(self, key: Partition, offset: int) -> bool:
        """Whether the partition is held at `offset` (that record is the one being retried)."""
        held = self._held.get(key)
        return held is not None and held.offset == offset

    def release(self, key: Partition) -> None:
        """Forgets the partition's hold: it succeeded, or the partition left the lane."""
        self._held.pop(key, None)
