"""Catch-up reads of the user topics: the capacity of a broker's fetch path, measured without adding load.

At the rate a cluster's real traffic runs, consumers at the head of the log keep up with a broker whose fetch path
lost most of its capacity (tiny socket buffers, capped fetch responses): every broker-side metric and every client
latency stays where it was, and the change is promoted to a fleet whose consumers, once behind, catch up many times
slower. So every interval a consumer that is behind reads back the latest records of a few user-topic partitions
each broker leads (canary.probe.catch_up), a bounded volume per partition, and reports how fast each leader
delivered them (`catch_up_bytes_per_s`, a reading of that broker, judged canary against control or baseline like
the brokers' own metrics). It writes nothing and reads at most `partitions` x `max_bytes` from each broker per
interval: no load on the cluster beyond one consumer catching up, which every cluster serves daily. A client not
allowed to read a topic gets no records from it; a cluster with no user records gets no readings (the metric is
then not judged)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from confluent_kafka import KafkaException

from canary.broker_metrics import USER_CATCH_UP
from canary.kafka.admin import is_user_topic
from canary.kafka.clients import QUIET_LOGGER, admin_client
from canary.kafka.health import metadata_and_brokers
from canary.lanes import broker_lane
from canary.observations import BrokerReading, Lane
from canary.probe.catch_up import MIN_RECORDS, Backlog, Key, behind_consumer, read_each_leader

SOURCE = "user-reads"
# The record size assumed for a partition not read yet (a read then learns its real one).
_FIRST_RECORD_SIZE = 1000


@dataclass(frozen=True)
class UserReadsConfig:
    bootstrap_servers: str
    max_bytes: int                 # read back per partition per interval
    partitions: int                # per broker: the partitions it leads that are read back
    interval: float                # seconds between reads
    run_id: str
    client: dict[str, str] = field(default_factory=dict)


class UserReads:
    """Reads in a thread from `start()` to `stop()`; each round's readings go to `emit`."""

    def __init__(self, config: UserReadsConfig, emit: Callable[[BrokerReading], None]):
        self.config = config
        self.emit = emit
        self.rounds = 0
        self.read_bytes = 0
        self._record_size: dict[Key, float] = {}   # the partitions read back so far: their record size
        self._too_few: set[Key] = set()              # tried, with too few records to time
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        base = {"bootstrap.servers": config.bootstrap_servers, "logger": QUIET_LOGGER, **config.client}
        self._admin = admin_client(config.bootstrap_servers, config.client)
        self._consumer = behind_consumer(base, config.max_bytes, "kafka-canary-reads")

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="user-reads", daemon=True)
        self._thread.start()

    def stop(self) -> dict:
        """Stops reading; what was read (JSON-able)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        self._consumer.close()
        return {"rounds": self.rounds, "read_mb": round(self.read_bytes / 1e6, 1),
                "max_bytes_per_partition": self.config.max_bytes, "partitions_per_broker": self.config.partitions}

    def _loop(self) -> None:
        while not self._stop.wait(self.config.interval):
            try:
                self.read_once()
            except (KafkaException, TimeoutError):
                continue  # the cluster not answering is the window's watch's business; read again next interval

    def read_once(self) -> list[BrokerReading]:
        """One round: the chosen partitions read back, a reading per partition of its leader (emitted, returned)."""
        at = float(int(time.time() * 1000))
        leaders, lanes = self._leaders()
        chosen = self._chosen(leaders)
        caught = read_each_leader(self._consumer, {broker: [self._backlog(key) for key in keys]
                                                   for broker, keys in chosen.items()},
                                  self.config.interval / 2, self._stop)  # half an interval for them all
        self._too_few |= {key for keys in chosen.values() for key in keys} - caught.keys()
        readings = []
        for key, c in sorted(caught.items()):
            self._record_size[key] = c.bytes / max(c.records - 1, 1)
            self._too_few.discard(key)
            self.read_bytes += c.bytes
            broker = leaders[key]
            lane = lanes.get(broker, "baseline")
            readings.append(BrokerReading(self.config.run_id, SOURCE, broker, lane, USER_CATCH_UP, c.bytes / c.seconds,
                                          at))
        for reading in readings:
            self.emit(reading)
        self.rounds += 1
        return readings

    def _leaders(self) -> tuple[dict[Key, int], dict[int, Lane]]:
        metadata, nodes = metadata_and_brokers(self._admin, 10)
        leaders = {(name, p.id): p.leader for name, t in metadata.topics.items() if is_user_topic(name)
                   and t.error is None for p in t.partitions.values() if p.leader >= 0}
        return leaders, {n.id: broker_lane(n.rack) for n in nodes}

    def _chosen(self, leaders: dict[Key, int]) -> dict[int, list[Key]]:
        """Up to `partitions` partitions of each leader, the same ones round after round while they hold records: those
        read back before first, then the ones not tried yet, in name order, and those that held too few last."""
        def rank(key: Key) -> tuple[int, Key]:
            return (0 if key in self._record_size and key not in self._too_few else 2 if key in self._too_few else 1,
                    key)

        by_broker: dict[int, list[Key]] = {}
        for key in sorted(leaders, key=rank):
            by_broker.setdefault(leaders[key], []).append(key)
        return {broker: keys[:self.config.partitions] for broker, keys in sorted(by_broker.items())}

    def _backlog(self, key: Key) -> Backlog:
        size = self._record_size.get(key, _FIRST_RECORD_SIZE)
        records = max(2 * MIN_RECORDS, int(self.config.max_bytes / max(size, 1.0)) + 1)
        return Backlog(key[0], key[1], records, self.config.max_bytes)
