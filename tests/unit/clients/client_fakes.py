"""Fakes for the lane-aware clients' unit tests: a lane view the test changes by hand."""

from __future__ import annotations

from canary.clients import TopicLanes

# Broker 3 is the canary broker; partition p is led by broker p % 3 + 1, so 2 and 5 are canary partitions.
RACKS = {1: None, 2: "zone-b", 3: "canary-broker"}


def lanes_of(topic: str, leaders: dict[int, int | None], racks: dict[int, str | None] | None = None) -> TopicLanes:
    return TopicLanes.from_leaders(topic, leaders, racks or RACKS)


class FakeView:
    """A LaneSource whose topics the test sets; counts refresh requests."""

    def __init__(self, *lanes: TopicLanes):
        self.topics = {t.topic: t for t in lanes}
        self.version = 1
        self.refreshes = 0

    def set(self, lanes: TopicLanes) -> None:
        self.topics[lanes.topic] = lanes
        self.version += 1

    def get(self, topic: str) -> TopicLanes:
        return self.topics.setdefault(topic, TopicLanes.missing(topic))

    def refresh_soon(self) -> None:
        self.refreshes += 1


class FakeError:
    def __init__(self, text: str):
        self.text = text

    def str(self) -> str:
        return self.text


class FakeRecord:
    """What confluent_kafka hands to delivery callbacks and returns from poll()."""

    def __init__(self, topic: str, partition: int, offset: int = 0, value: bytes | None = None,
                 timestamp: int = 0, error=None, latency: float | None = None, headers: list | None = None):
        self._topic, self._partition, self._offset = topic, partition, offset
        self._value, self._timestamp, self._error, self._latency = value, timestamp, error, latency
        self._headers = headers

    def headers(self) -> list | None:
        return self._headers

    def latency(self) -> float | None:
        """librdkafka's: seconds from produce() to the broker's response (delivery reports only)."""
        return self._latency

    def topic(self) -> str:
        return self._topic

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int:
        return self._offset

    def value(self) -> bytes | None:
        return self._value

    def timestamp(self) -> tuple[int, int]:
        return (1, self._timestamp) if self._timestamp else (0, -1)

    def error(self):
        return self._error


class FakeProducer:
    """Records produce() calls; poll() runs their delivery callbacks, failing the partitions in `failing`."""

    def __init__(self):
        self.sent: list[dict] = []
        self.pending: list[tuple] = []
        self.failing: set[int] = set()
        self.latency: float | None = None  # what each delivered record's latency() says

    def produce(self, topic, value=None, key=None, **kwargs):
        self.sent.append({"topic": topic, "value": value, "key": key, **kwargs})
        self.pending.append((topic, kwargs.get("partition", -1), kwargs["on_delivery"]))

    def poll(self, timeout=0.0) -> int:
        served, self.pending = self.pending, []
        for topic, partition, callback in served:
            failed = partition in self.failing
            callback(FakeError("Local: Message timed out") if failed else None,
                     FakeRecord(topic, partition, latency=None if failed else self.latency))
        return len(served)

    def flush(self, timeout=0.0) -> int:
        self.poll()
        return 0

    def __len__(self) -> int:
        return len(self.pending)


class FakeConsumer:
    """Assignment, committed offsets and a queue of records; records every call the lane consumer makes."""

    def __init__(self, committed: dict[tuple[str, int], int] | None = None, high: int = 100):
        self.committed_offsets = dict(committed or {})
        self.assigned: dict[tuple[str, int], int] = {}
        self.queue: list[FakeRecord] = []
        self.stored: dict[tuple[str, int], int] = {}
        self.calls: list[tuple] = []
        self.high = high
        self.closed = False

    def committed(self, partitions, timeout=None):
        from confluent_kafka import OFFSET_INVALID, TopicPartition
        return [TopicPartition(tp.topic, tp.partition, self.committed_offsets.get((tp.topic, tp.partition),
                                                                                   OFFSET_INVALID))
                for tp in partitions]

    def incremental_assign(self, partitions):
        self.calls.append(("assign", sorted((tp.topic, tp.partition, tp.offset) for tp in partitions)))
        self.assigned.update({(tp.topic, tp.partition): tp.offset for tp in partitions})

    def incremental_unassign(self, partitions):
        self.calls.append(("unassign", sorted((tp.topic, tp.partition) for tp in partitions)))
        for tp in partitions:
            self.assigned.pop((tp.topic, tp.partition))

    def poll(self, timeout=None):
        return self.queue.pop(0) if self.queue else None

    def pause(self, partitions):
        self.calls.append(("pause", sorted((tp.topic, tp.partition) for tp in partitions)))

    def resume(self, partitions):
        self.calls.append(("resume", sorted((tp.topic, tp.partition) for tp in partitions)))

    def seek(self, partition):
        self.calls.append(("seek", (partition.topic, partition.partition, partition.offset)))

    def store_offsets(self, offsets=None, message=None):
        self.stored.update({(tp.topic, tp.partition): tp.offset for tp in offsets})

    def commit(self, offsets=None, asynchronous=True):
        self.calls.append(("commit", sorted((tp.topic, tp.partition, tp.offset) for tp in offsets)))
        self.committed_offsets.update({(tp.topic, tp.partition): tp.offset for tp in offsets})

    def get_watermark_offsets(self, partition, timeout=None, cached=False):
        return 0, self.high

    def close(self):
        self.closed = True
