"""A window's client observations (a client rollout's service, the migration canary's instances), read back from the
observations topic."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

from confluent_kafka import Consumer, KafkaException
from confluent_kafka import TopicPartition as TP

from canary.kafka.clients import QUIET_LOGGER, position
from canary.observations import OBSERVATIONS_TOPIC
from canary.rollout.core.step import RolloutError


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
                _, partition, offset = position(msg)
                if offset + 1 >= ends[partition]:
                    todo.pop(partition, None)
                if msg.key() != key:
                    continue
                value = msg.value() or b""  # a record without a value is malformed, not a crash
                try:
                    send_ts = json.loads(value)["send_ts"]
                except (ValueError, KeyError, TypeError):
                    send_ts = from_ms  # kept: the reader counts it as malformed
                if from_ms <= send_ts < to_ms:
                    out.write(value.decode(errors="replace") + "\n")
                    written += 1
    except KafkaException as exc:
        raise RolloutError(f"reading observations from {OBSERVATIONS_TOPIC} failed: {exc.args[0].str()}") from exc
    finally:
        consumer.close()
    return written
