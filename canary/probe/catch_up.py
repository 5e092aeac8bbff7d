"""Reading partitions' latest records back as a consumer that is behind does: how fast each partition's leader
delivers a backlog once it started. A consumer at the head of the log gets what was just written in small fetches,
and a broker that caps its fetch responses or sends through tiny socket buffers keeps up with it; a consumer
catching up (a service back from a deploy, Kafka's ConsumerPerformance) needs the broker's fetch path at full speed,
and that is where such a broker is several times slower. Used by the window's load on its own topic and by the
window's reads of the user topics (canary.probe.user_reads)."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import NamedTuple

from confluent_kafka import Consumer, KafkaException, TopicPartition

# A partition with fewer records than this to read back is not timed: too few to span fetch responses.
MIN_RECORDS = 50

Key = tuple[str, int]  # (topic, partition)


class Caught(NamedTuple):
    """One partition read back: the record values' bytes that arrived after its first record, the seconds from that
    record to its last, and how many records came."""

    bytes: int
    seconds: float
    records: int


@dataclass(frozen=True)
class Backlog:
    """What to read back of one partition: its latest `records` records, stopping once `max_bytes` of record values
    arrived (None: no byte bound)."""

    topic: str
    partition: int
    records: int
    max_bytes: int | None = None


def read_behind(consumer: Consumer, backlogs: list[Backlog], give_up_s: float,
                stop: threading.Event | None = None, batch_wait_s: float = 0.1) -> dict[Key, Caught]:
    """Reads every backlog with one consumer, all partitions at once; per partition the bytes that reached the
    client after its first record and the seconds from that record to its last: how fast the broker delivered the
    backlog once it started. A broker that answers a fetch with most of it delivers it in a burst (bounded by the
    client, alike for every such broker); one that caps its fetch responses hands it over response by response,
    interleaved with the others' records, and takes several times as long. (Timed from the consumer's start instead,
    every partition ends when the client has worked through all of them: the client, not the broker, sets the
    pace.) Gives up on the records not read within `give_up_s`: a broker that slow has shown what it does.
    `batch_wait_s`: how long the client collects records before handing them over (the moment a record is taken as
    arrived is when its batch is handed over); 0 takes whatever arrived at once, polling every half millisecond."""
    ends: dict[Key, int] = {}
    budget: dict[Key, int | None] = {}
    starts = []
    for b in backlogs:
        try:
            low, high = consumer.get_watermark_offsets(TopicPartition(b.topic, b.partition), timeout=2, cached=False)
        except KafkaException:
            continue
        start = max(low, high - b.records)
        if high - start >= MIN_RECORDS:
            ends[(b.topic, b.partition)] = high
            budget[(b.topic, b.partition)] = b.max_bytes
            starts.append(TopicPartition(b.topic, b.partition, start))
    if not ends:
        return {}
    first: dict[Key, float] = {}
    last: dict[Key, float] = {}
    read = dict.fromkeys(ends, 0)
    records = dict.fromkeys(ends, 0)
    consumer.assign(starts)
    deadline = time.monotonic() + give_up_s
    try:
        while len(last) < len(ends) and time.monotonic() < deadline and not (stop and stop.is_set()):
            batch = consumer.consume(10_000, timeout=batch_wait_s)
            if not batch and not batch_wait_s:
                time.sleep(0.0005)
            for msg in batch:
                key, offset = (msg.topic(), msg.partition()), msg.offset()
                if msg.error() is not None or key not in ends or key in last or offset is None:
                    continue
                now = time.monotonic()
                records[key] += 1
                if key in first:
                    read[key] += len(msg.value() or b"")
                else:
                    first[key] = now
                limit = budget[key]
                if offset >= ends[key] - 1 or (limit is not None and read[key] >= limit):
                    last[key] = now
    finally:
        consumer.unassign()
    now = time.monotonic()
    return {k: Caught(read[k], max(last.get(k, now) - first[k], 1e-6), records[k]) for k in first if read[k]}
