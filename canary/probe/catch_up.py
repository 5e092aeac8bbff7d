"""Reading partitions' latest records back as a consumer that is behind does: how fast each partition's leader
delivers a backlog once it started. A consumer at the head of the log gets what was just written in small fetches,
and a broker that caps its fetch responses or sends through tiny socket buffers keeps up with it; a consumer
catching up (a service back from a deploy, Kafka's ConsumerPerformance) needs the broker's fetch path at full speed,
and that is where such a broker is several times slower. Used by the window's load on its own topic and by the
window's reads of the user topics (canary.probe.user_reads)."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import NamedTuple

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition

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


def behind_consumer(base: Mapping[str, object], max_bytes: int, client_id: str) -> Consumer:
    """The consumer that reads backlogs of up to `max_bytes` per partition (`base`: bootstrap servers and the client
    settings). Its fetch responses hold at most a quarter of that per partition, so every read spans several of them
    and a broker that caps or trickles its responses shows even on a partition that holds little: a backlog that
    fits one response arrives in one piece, and its timing is the client's loop, not the broker (the load's reads
    once measured 1.5 GB/s through 2 KiB socket buffers that way)."""
    per_fetch = max(64 * 1024, max_bytes // 4)
    return Consumer({**base, "group.id": f"{client_id}-{int(time.time() * 1000)}", "enable.auto.commit": False,
                     "client.id": client_id, "max.partition.fetch.bytes": per_fetch,
                     "fetch.max.bytes": max(per_fetch, 50 * 1024 * 1024),
                     # A log that ends in a transaction's marker has no record at its last offset: its end says so.
                     "enable.partition.eof": True})


def read_each_leader(consumer: Consumer, by_leader: Mapping[int, list[Backlog]], within_s: float,
                     stop: threading.Event | None = None) -> dict[Key, Caught]:
    """Reads the backlogs of one leader at a time (`by_leader`), all within about `within_s`: read beside a slower
    one, a broker's records wait in the client's queue while it works through the others', and then time the client,
    not the broker."""
    give_up = max(within_s / max(len(by_leader), 1), 0.5)
    caught: dict[Key, Caught] = {}
    for backlogs in by_leader.values():
        caught |= read_behind(consumer, backlogs, give_up, stop)
    return caught


def read_behind(consumer: Consumer, backlogs: list[Backlog], give_up_s: float,
                stop: threading.Event | None = None) -> dict[Key, Caught]:
    """Reads every backlog with one consumer (behind_consumer's), all partitions at once; per partition the bytes that
    reached the client after its first record and the seconds from that record to its last: how fast the broker
    delivered the backlog once it started. A broker that answers a fetch with a full response delivers the backlog
    in a few bursts (bounded by the client, alike for every such broker); one that caps its fetch responses or sends
    through tiny socket buffers hands it over piece by piece and takes several times as long. (Timed from the
    consumer's start instead, every partition ends when the client has worked through all of them: the client, not
    the broker, sets the pace.) Whatever arrived is taken at once, and when nothing has the read blocks until a record
    does (never spinning beside the probe, whose latencies a busy loop in its process would slow), so a record counts
    as arrived when it did. A partition whose last offsets hold no record (a transaction's marker) ends at its end.
    Gives up on the records not read within `give_up_s`: a broker that slow has shown what it does."""
    reading = _Reading.of(consumer, backlogs)
    if not reading.ends:
        return {}
    consumer.assign(reading.starts)
    deadline = time.monotonic() + give_up_s
    try:
        while (len(reading.last) < len(reading.ends) and time.monotonic() < deadline
               and not (stop and stop.is_set())):
            batch = consumer.consume(10_000, timeout=0)
            if not batch:
                one = consumer.poll(min(0.05, max(deadline - time.monotonic(), 0)))  # returns as one arrives
                batch = [one] if one is not None else []
            for msg in batch:
                reading.take(msg)
    finally:
        consumer.unassign()
    return reading.caught(time.monotonic())


class _Reading:
    """The backlogs read_behind reads: per partition the offset it ends at and its byte budget, and as records
    arrive when its first, its latest and its last came (monotonic seconds), the bytes after its first record and
    how many records came."""

    def __init__(self, ends: dict[Key, int], budget: dict[Key, int | None], starts: list[TopicPartition]):
        self.ends, self.budget, self.starts = ends, budget, starts
        self.first: dict[Key, float] = {}
        self.latest: dict[Key, float] = {}
        self.last: dict[Key, float] = {}
        self.read = dict.fromkeys(ends, 0)
        self.records = dict.fromkeys(ends, 0)

    @classmethod
    def of(cls, consumer: Consumer, backlogs: list[Backlog]) -> _Reading:
        """The backlogs with at least MIN_RECORDS to read, each from its latest `records` records."""
        ends: dict[Key, int] = {}
        budget: dict[Key, int | None] = {}
        starts = []
        for b in backlogs:
            try:
                low, high = consumer.get_watermark_offsets(TopicPartition(b.topic, b.partition), timeout=2,
                                                           cached=False)
            except KafkaException:
                continue
            start = max(low, high - b.records)
            if high - start >= MIN_RECORDS:
                ends[(b.topic, b.partition)] = high
                budget[(b.topic, b.partition)] = b.max_bytes
                starts.append(TopicPartition(b.topic, b.partition, start))
        return cls(ends, budget, starts)

    def take(self, msg: Message) -> None:
        """One record (or a partition's end) as it arrived."""
        key, offset = (msg.topic(), msg.partition()), msg.offset()
        if key not in self.ends or key in self.last:
            return
        error = msg.error()
        if error is not None:
            if error.code() == KafkaError._PARTITION_EOF and key in self.latest:
                self.last[key] = self.latest[key]
            return
        if offset is None:
            return
        now = self.latest[key] = time.monotonic()
        self.records[key] += 1
        if key in self.first:
            self.read[key] += len(msg.value() or b"")
        else:
            self.first[key] = now
        limit = self.budget[key]
        if offset >= self.ends[key] - 1 or (limit is not None and self.read[key] >= limit):
            self.last[key] = now

    def caught(self, now: float) -> dict[Key, Caught]:
        """Each partition whose records brought bytes after the first: its bytes, seconds and records."""
        return {k: Caught(self.read[k], max(self.last.get(k, now) - self.first[k], 1e-6), self.records[k])
                for k in self.first if self.read[k]}
