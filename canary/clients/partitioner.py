"""The partition of each record a lane-aware producer sends (pure: no I/O, unit-tested with fakes).

Rules, in order:

1. The candidates are the client lane's partitions (led by a broker of its lane), sorted.
2. None → **fallback** (availability first, as the KIP says: "if a topic has no canary partition,
   producers in canary will be able to produce messages to non-canary partitions"): every partition that
   has a leader, or every partition when none has one. Symmetric for a baseline producer whose topic is led
   only by canary brokers.
3. A keyed record goes to `candidates[crc32(key) % len(candidates)]`; a record without a key goes round robin.
   CRC32 is librdkafka's own key hash (`consistent` partitioner): stable across processes and restarts.

The key trade-off: a key is stable only while its lane's partition set is. When canary partitions appear or
disappear, or a leader moves between lanes, the lane's set changes and keys move, as they do when partitions are
added to a topic; per-key order holds within one stable set. And a key sent by both lanes lives in two partitions,
one per lane: services that need all records of a key in one partition (per-key state, compaction) must not split
that key's producers across lanes.
"""

from __future__ import annotations

import itertools
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

from canary.clients.view import TopicLanes
from canary.observations import Lane

# librdkafka's RD_KAFKA_PARTITION_UA: let the client's own partitioner decide (no partition known at all).
UNASSIGNED = -1


@dataclass(frozen=True)
class PartitionChoice:
    partition: int          # UNASSIGNED when the topic's partitions are not known yet
    leader: int | None      # the partition's leader as the view saw it
    fallback: bool          # True when the lane had no partition and the choice left it


def candidates(lanes: TopicLanes, lane: Lane) -> tuple[tuple[int, ...], bool]:
    """The partitions a `lane` client may send to, and whether that is the fallback."""
    own = lanes.partitions(lane)
    if own:
        return own, False
    return lanes.led or lanes.all, True


def key_bytes(key: str | bytes) -> bytes:
    return key.encode() if isinstance(key, str) else bytes(key)


def keyed_partition(key: str | bytes, partitions: Sequence[int]) -> int:
    """The stable partition of `key` among `partitions` (sorted): CRC32 of the key modulo their number."""
    return partitions[zlib.crc32(key_bytes(key)) % len(partitions)]


class LanePartitioner:
    """Chooses partitions for one client lane; keyless records go round robin over the candidates."""

    def __init__(self, lane: Lane):
        self.lane = lane
        self._next = itertools.count()

    def choose(self, lanes: TopicLanes, key: str | bytes | None = None) -> PartitionChoice:
        found, fallback = candidates(lanes, self.lane)
        if not found:
            return PartitionChoice(UNASSIGNED, None, True)
        partition = keyed_partition(key, found) if key is not None else found[next(self._next) % len(found)]
        return PartitionChoice(partition, lanes.leader_of(partition), fallback)
