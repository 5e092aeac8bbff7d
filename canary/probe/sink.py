"""Where observations go: the observations topic on the cluster (so the Spark analysis reads a run
by time range: records carry the time they were written, key = run id) and, optionally, a local
JSONL file. Writing never blocks the probe for long and never raises into it: failures are counted."""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from pathlib import Path

from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import NewTopic

from canary.errors import ClusterError
from canary.kafka.clients import PRODUCER_DEFAULTS, QUIET_LOGGER
from canary.observations import Record

OBSERVATIONS_RETENTION_MS = 7 * 24 * 3600 * 1000


def ensure_observations_topic(admin, topic: str, brokers: int, timeout: float = 30.0) -> bool:
    """Creates the observations topic if missing (an existing one is a harmless repeat); True if created."""
    rf = min(brokers, 3)
    new = NewTopic(topic, num_partitions=max(3, brokers), replication_factor=rf,
                   config={"min.insync.replicas": str(max(1, rf - 1)), "retention.ms": str(OBSERVATIONS_RETENTION_MS)})
    for name, future in admin.create_topics([new], operation_timeout=timeout, request_timeout=timeout).items():
        try:
            future.result(timeout=timeout)
        except KafkaException as exc:
            if exc.args[0].name() == "TOPIC_ALREADY_EXISTS":
                return False
            raise ClusterError(f"creating observations topic {name} failed: {exc.args[0].str()}") from exc
    return True


class ObservationSink:
    def __init__(self, bootstrap_servers: str | None, topic: str | None, client: Mapping[str, object] | None = None,
                 path: str | Path | None = None):
        self.topic = topic
        self.produced = 0
        self.failed = 0
        self.dropped = 0
        self._lock = threading.Lock()
        self._producer = None
        if topic and bootstrap_servers:
            # Reports of failures only (a callback for every written observation would cost the probe as much
            # CPU as its own messages' reports); half a second of lingering keeps the requests few, and the
            # analysis reads a run long after.
            self._producer = Producer({
                **PRODUCER_DEFAULTS, "bootstrap.servers": bootstrap_servers, "acks": "all", "linger.ms": 500,
                "compression.type": "lz4", "logger": QUIET_LOGGER, "queue.buffering.max.messages": 500_000,
                "delivery.report.only.error": True, **(client or {})})
        self._file = open(path, "a", buffering=1 << 16) if path else None  # noqa: SIM115 - closed in close()

    def emit(self, obs: Record) -> None:
        # vars() of the flat frozen dataclass: the same JSON as its to_json, without asdict's copying
        raw = json.dumps(vars(obs), separators=(",", ":"))
        if self._file is not None:
            with self._lock:
                self._file.write(raw + "\n")
        if self._producer is not None and self.topic is not None:
            try:
                self._producer.produce(self.topic, value=raw.encode(), key=obs.run_id.encode(),
                                       on_delivery=self._failed)
                with self._lock:  # emitted from the producing and the consuming thread alike
                    self.produced += 1
            except BufferError:
                with self._lock:
                    self.dropped += 1

    def _failed(self, err, _msg) -> None:
        if err is not None:
            self.failed += 1

    def poll(self, timeout: float = 0.0) -> None:
        if self._producer is not None:
            self._producer.poll(timeout)

    def close(self, timeout: float = 15.0) -> None:
        if self._producer is not None:
            self._producer.flush(timeout)
        if self._file is not None:
            with self._lock:
                self._file.close()
                self._file = None

    def stats(self) -> dict[str, int]:
        pending = len(self._producer) if self._producer is not None else 0
        # written: acknowledged by the cluster (failures alone are reported)
        return {"written": max(0, self.produced - self.failed - pending), "failed": self.failed,
                "dropped": self.dropped, "pending": pending}
