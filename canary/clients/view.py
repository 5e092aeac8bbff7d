"""Which partitions of a topic are in which lane, as cluster metadata says: a partition's lane is its
leader's lane (canary.lanes.broker_lane of the leader's `broker.rack`). Leadership moves, so the view
is refreshed by a background thread every `interval` seconds and soon after a client reports an error
(`refresh_soon()`); clients read the latest `TopicLanes` on every send or poll, which never blocks.

    view = LaneView({"bootstrap.servers": "127.0.0.1:9092"}, topics=["orders"], interval=5)
    lanes = view.get("orders")
    lanes.partitions("canary")        # (2, 5): the canary partitions, sorted
    view.close()
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Protocol

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from canary.kafka.clients import QUIET_LOGGER
from canary.lanes import broker_lane
from canary.observations import Lane

log = logging.getLogger(__name__)

# librdkafka settings a helper client (the view's admin client, the observation sink) takes over from a
# service's client: where the cluster is and how to log in, nothing about producing or consuming.
_CONNECTION_PREFIXES = ("bootstrap.servers", "metadata.broker.list", "security.protocol", "sasl.", "ssl.", "ssl_",
                        "socket.", "broker.address.", "client.dns.lookup", "enable.ssl.certificate.verification",
                        "api.version.", "broker.version.fallback")


def connection_settings(config: Mapping[str, object]) -> dict[str, object]:
    """The connection and security settings of a client's config (bootstrap servers, security.protocol,
    sasl.*, ssl.*, socket.*, ...), for helper clients that must reach the same cluster the same way."""
    return {k: v for k, v in config.items() if k.startswith(_CONNECTION_PREFIXES)}


@dataclass(frozen=True)
class TopicLanes:
    """One topic's partitions and their leaders and lanes at one moment. A partition without a leader (offline,
    or an election in progress), or led by a broker whose rack is not known yet, has lane None and belongs to no
    lane. `exists` False: the cluster does not know the topic (yet)."""

    topic: str
    leaders: Mapping[int, int | None] = field(default_factory=dict)
    lanes: Mapping[int, Lane | None] = field(default_factory=dict)
    exists: bool = True

    @classmethod
    def from_leaders(cls, topic: str, leaders: Mapping[int, int | None], racks: Mapping[int, str | None]
                     ) -> TopicLanes:
        """From partition -> leader broker id (None or < 0: no leader) and broker id -> rack (a broker missing
        there: rack unknown)."""
        leaders = {p: (b if b is not None and b >= 0 else None) for p, b in leaders.items()}
        return cls(topic, leaders, {p: broker_lane(racks[b]) if b is not None and b in racks else None
                                    for p, b in leaders.items()})

    @classmethod
    def missing(cls, topic: str) -> TopicLanes:
        return cls(topic, {}, {}, exists=False)

    @cached_property
    def all(self) -> tuple[int, ...]:
        """Every partition, sorted, leaderless ones included."""
        return tuple(sorted(self.leaders))

    @cached_property
    def led(self) -> tuple[int, ...]:
        """The partitions that have a leader, sorted."""
        return tuple(p for p in self.all if self.leaders[p] is not None)

    @cached_property
    def _by_lane(self) -> dict[str, tuple[int, ...]]:
        return {lane: tuple(p for p in self.all if self.lanes[p] == lane) for lane in ("canary", "baseline")}

    def partitions(self, lane: Lane) -> tuple[int, ...]:
        """The lane's partitions (led by a broker of that lane), sorted."""
        return self._by_lane[lane]

    def lane_of(self, partition: int) -> Lane | None:
        return self.lanes.get(partition)

    def leader_of(self, partition: int) -> int | None:
        return self.leaders.get(partition)

    def same_as(self, other: TopicLanes | None) -> bool:
        return other is not None and (self.exists, dict(self.leaders), dict(self.lanes)) == (
            other.exists, dict(other.leaders), dict(other.lanes))


class LaneSource(Protocol):
    """What the lane-aware clients need from a view (LaneView; unit tests pass a fake)."""

    @property
    def version(self) -> int: ...

    def get(self, topic: str) -> TopicLanes: ...

    def refresh_soon(self) -> None: ...


class LaneView:
    """Partitions of topics by lane from cluster metadata, kept current by a background thread.

    config: librdkafka settings of the service's client; only the connection and security ones are used
    (connection_settings). topics: known up front (others are added by the first `get`). interval: seconds
    between refreshes. timeout: bound of each metadata request. `version` grows whenever any topic's leaders or
    lanes change, so a client notices a change with one integer comparison.

    A failed refresh keeps the last view (logged, counted in `errors`) and is retried at the next interval.
    """

    def __init__(self, config: Mapping[str, object], topics: Iterable[str] = (), interval: float = 10.0,
                 timeout: float = 10.0, admin: AdminClient | None = None):
        if interval <= 0 or timeout <= 0:
            raise ValueError(f"lane view interval and timeout must be > 0, got {interval} and {timeout}")
        self.interval = interval
        self.timeout = timeout
        # Any: the settings hold a logger object besides the strings and numbers (the stub types only those).
        settings: dict[str, Any] = {"logger": QUIET_LOGGER, "socket.timeout.ms": int(timeout * 1000),
                                    **connection_settings(config), "allow.auto.create.topics": False}
        self.admin = admin or AdminClient(settings)
        self.version = 0
        self.errors = 0
        self.last_error: str | None = None
        self._topics: dict[str, TopicLanes] = {}
        self._racks: dict[int, str | None] = {}  # broker id -> rack, as last read
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        wanted = list(dict.fromkeys(topics))
        if wanted:
            self.refresh(wanted)
        self._thread = threading.Thread(target=self._loop, name="lane-view", daemon=True)
        self._thread.start()

    def get(self, topic: str) -> TopicLanes:
        """The latest view of `topic`. A topic not seen before is fetched now (at most `timeout` seconds) and
        followed from then on; when that fails it reads as missing until the next refresh."""
        lanes = self._topics.get(topic)
        if lanes is None:
            self.refresh([topic])
            lanes = self._topics.get(topic)
            if lanes is None:
                with self._lock:
                    lanes = self._topics.setdefault(topic, TopicLanes.missing(topic))
                self.refresh_soon()
        return lanes

    @property
    def topics(self) -> list[str]:
        return sorted(self._topics)

    def refresh_soon(self) -> None:
        """Asks for a refresh before the next interval (clients call it when a send or fetch fails: leadership
        may have moved)."""
        self._wake.set()

    def refresh(self, topics: Iterable[str] | None = None) -> bool:
        """Fetches the topics (default: every followed one) now; True when all were read. Never raises on a
        cluster error: the last view stays.

        Leaders come from a Metadata request per topic, which any broker answers (the admin client sets
        allow.auto.create.topics=false, so asking never creates a topic). Racks come from DescribeCluster, which
        librdkafka sends to the broker it takes for the controller: when that broker is the one restarting, racks
        cannot be read for a while, so leaders are published first with the racks last seen (a rack changes only
        at a broker restart) and DescribeCluster failing never holds a leadership change back."""
        names = list(topics) if topics is not None else list(self._topics)
        if not names:
            return True
        leaders: dict[str, dict[int, int | None] | None] = {}
        ok = True
        for topic in names:
            try:
                meta = self.admin.list_topics(topic=topic, timeout=self.timeout).topics.get(topic)
            except KafkaException as exc:
                ok = False
                self._failed(f"metadata of topic {topic}: {exc.args[0]}")
                continue
            if meta is None or (meta.error is not None and meta.error.name() == "UNKNOWN_TOPIC_OR_PART"):
                leaders[topic] = None
            else:  # per partition even when the topic reports an error (a partition without a leader)
                leaders[topic] = {p.id: p.leader for p in meta.partitions.values()}
        if self._racks:
            self._publish(leaders)
        ok = self._read_racks() and ok
        self._publish(leaders)
        if ok:
            self.last_error = None
        return ok

    def _read_racks(self) -> bool:
        timeout = min(self.timeout, 5.0)
        try:
            nodes = self.admin.describe_cluster(request_timeout=timeout).result(timeout=timeout + 5).nodes
        except (KafkaException, TimeoutError) as exc:
            self._failed(f"broker racks: {exc.args[0] if exc.args else 'no answer'}")
            return False
        # brokers that left the metadata keep their last rack: they come back with it unless restarted with another
        self._racks = {**self._racks, **{n.id: n.rack for n in nodes}}
        return True

    def _publish(self, leaders: Mapping[str, Mapping[int, int | None] | None]) -> None:
        fresh = {t: TopicLanes.missing(t) if ls is None else TopicLanes.from_leaders(t, ls, self._racks)
                 for t, ls in leaders.items()}
        with self._lock:
            changed = [t for t, lanes in fresh.items() if not lanes.same_as(self._topics.get(t))]
            self._topics.update(fresh)
            if changed:
                self.version += 1
        for topic in changed:
            lanes = fresh[topic]
            log.info("lane view of %s: canary partitions %s, baseline partitions %s%s", topic,
                     list(lanes.partitions("canary")), list(lanes.partitions("baseline")),
                     "" if lanes.exists else " (topic missing)")

    def _failed(self, text: str) -> None:
        self.errors += 1
        if self.last_error is None:  # once per failing streak: a down cluster must not flood the log
            log.warning("lane view: %s; keeping the last view", text)
        self.last_error = text

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self.interval)
            self._wake.clear()
            if self._stop.is_set():
                return
            try:
                self.refresh()
            except Exception as exc:  # the thread must outlive any surprise; clients keep the last view
                self._failed(f"refresh stopped by {exc!r}")

    def close(self) -> None:
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout=self.timeout + 10)

    def __enter__(self) -> LaneView:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
