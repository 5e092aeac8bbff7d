"""The service's steady traffic during the window and the promotion: a producer thread of this process."""

from __future__ import annotations

import contextlib
import logging
import threading
import time

from confluent_kafka import KafkaError, Message, Producer

from canary.kafka.clients import PRODUCER_DEFAULTS, QUIET_LOGGER
from canary.rollout.migration.ledger import DeliveryLedger
from canary.rollout.migration.spec import MigrationSpec

log = logging.getLogger(__name__)


class Traffic:
    """Steady traffic: `rate` records/s over every partition in turn, each acknowledgement in the ledger."""

    def __init__(self, spec: MigrationSpec, partitions: list[int], ledger: DeliveryLedger):
        self.spec, self.partitions, self.ledger = spec, partitions, ledger
        self.producer = Producer({**PRODUCER_DEFAULTS, **spec.connection(), "acks": "all", "linger.ms": 5,
                                  "logger": QUIET_LOGGER})
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._produce_until_stopped, name="migration-traffic", daemon=True)

    def _delivered(self, err: KafkaError | None, msg: Message) -> None:
        partition, offset = msg.partition(), msg.offset()
        if err is None and partition is not None and offset is not None:
            self.ledger.ack(partition, offset)
        else:
            self.ledger.produce_failed()

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

    def stop(self) -> None:
        self._stop.set()
        self.thread.join(timeout=10)
        left = self.producer.flush(30)
        if left:
            log.warning("migration traffic: %d record(s) not acknowledged at the end", left)
