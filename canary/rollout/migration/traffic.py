"""Synthetic traffic, only when the spec asks for it (`rate` > 0): a producer thread of this process writing
`rate` records/s into the service's topic during the window and the promotion. Without it the window judges the
service's own traffic."""

from __future__ import annotations

import contextlib
import logging
import threading
import time

from confluent_kafka import KafkaError, Message, Producer

from canary.kafka.clients import PRODUCER_DEFAULTS, QUIET_LOGGER
from canary.rollout.migration.spec import MigrationSpec

log = logging.getLogger(__name__)


class Traffic:
    """Steady traffic: `rate` records/s over every partition in turn; counts what was acknowledged and what failed."""

    def __init__(self, spec: MigrationSpec, partitions: list[int]):
        self.spec, self.partitions = spec, partitions
        self.producer = Producer({**PRODUCER_DEFAULTS, **spec.connection(), "acks": "all", "linger.ms": 5,
                                  "logger": QUIET_LOGGER})
        self.acknowledged = self.failed = 0
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._produce_until_stopped, name="migration-traffic", daemon=True)

    def _delivered(self, err: KafkaError | None, _msg: Message) -> None:
        if err is None:
            self.acknowledged += 1
        else:
            self.failed += 1

    def _produce_until_stopped(self) -> None:
        sent, started = 0, time.monotonic()
        while not self._stop.is_set():
            with contextlib.suppress(BufferError):
                self.producer.produce(self.spec.topic, str(sent).encode(),
                                      partition=self.partitions[sent % len(self.partitions)],
                                      on_delivery=self._delivered)
                sent += 1
            self.producer.poll(0)
            self._stop.wait(max(0.0, started + sent / self.spec.rate - time.monotonic()))

    def start(self) -> Traffic:
        self.thread.start()
        return self

    def stop(self) -> dict:
        """Stops writing and waits for the acknowledgements; returns what was acknowledged and what failed."""
        self._stop.set()
        self.thread.join(timeout=10)
        left = self.producer.flush(30)
        if left:
            log.warning("migration traffic: %d record(s) not acknowledged at the end", left)
        return {"acknowledged": self.acknowledged, "failed": self.failed + left}
