"""Which user-topic partitions the window reads back, one leader at a time, and what it reports of them (the reads
themselves on real brokers: tests/integration/test_user_reads.py)."""

from __future__ import annotations

from types import SimpleNamespace

import canary.probe.catch_up as catch_up
import canary.probe.user_reads as user_reads
from canary.kafka.admin import is_user_topic
from canary.lanes import canary_rack
from canary.probe.catch_up import Backlog, Caught
from canary.probe.user_reads import UserReads, UserReadsConfig


def _metadata(topics: dict[str, dict[int, int]]):
    shown = {name: SimpleNamespace(error=None, partitions={p: SimpleNamespace(id=p, leader=b)
                                                           for p, b in leaders.items()})
             for name, leaders in topics.items()}
    nodes = [SimpleNamespace(id=1, rack="a"), SimpleNamespace(id=2, rack=canary_rack("b"))]
    return SimpleNamespace(topics=shown), nodes


def _reads(monkeypatch, topics: dict[str, dict[int, int]], holding: dict[tuple[str, int], int]):
    """UserReads on a fake cluster: `holding` the records each partition has (none: too few to time); every read
    is recorded with the leader group it was part of."""
    calls: list[list[Backlog]] = []

    def read_behind(consumer, backlogs, give_up, stop):
        calls.append(list(backlogs))
        return {(b.topic, b.partition): Caught(min(b.max_bytes or 0, holding[(b.topic, b.partition)] * 1000), 0.01,
                                               holding[(b.topic, b.partition)])
                for b in backlogs if holding.get((b.topic, b.partition))}

    monkeypatch.setattr(user_reads, "metadata_and_brokers", lambda admin, timeout: _metadata(topics))
    monkeypatch.setattr(catch_up, "read_behind", read_behind)
    emitted: list = []
    reads = UserReads(UserReadsConfig("127.0.0.1:1", max_bytes=100_000, partitions=2, interval=5.0, run_id="r"),
                      emit=emitted.append)
    return reads, calls, emitted


def test_the_tools_and_kafkas_own_topics_are_never_read():
    assert is_user_topic("orders") and is_user_topic("a_b")
    assert not any(map(is_user_topic, ["__consumer_offsets", "__kafka_canary", "__kafka_canary_load", "_schemas"]))


def test_each_leader_is_read_apart_up_to_its_share_of_partitions_and_reported_in_its_lane(monkeypatch):
    topics = {"orders": {0: 1, 1: 2, 2: 1, 3: 2, 4: 1}, "__consumer_offsets": {0: 1}, "events": {0: 2}}
    holding = {("orders", p): 500 for p in range(5)} | {("events", 0): 500}
    reads, calls, emitted = _reads(monkeypatch, topics, holding)
    readings = reads.read_once()
    # One read per leader, its first two partitions in name order; never the internal topic.
    assert [[(b.topic, b.partition) for b in call] for call in calls] == [
        [("orders", 0), ("orders", 2)], [("events", 0), ("orders", 1)]]
    assert all(b.max_bytes == 100_000 and b.records >= 100 for call in calls for b in call)
    assert emitted == readings and len(readings) == 4
    assert {(r.broker, r.lane) for r in readings} == {(1, "baseline"), (2, "canary")}
    assert all(r.metric == "catch_up_bytes_per_s" and r.value == 100_000 / 0.01 for r in readings)
    assert reads.stop()["read_mb"] == 0.4


def test_partitions_with_too_few_records_give_way_to_others_and_those_read_are_kept(monkeypatch):
    topics = {"orders": {0: 1, 1: 1, 2: 1, 3: 1}}
    reads, calls, _ = _reads(monkeypatch, topics, {("orders", 1): 500, ("orders", 3): 500})
    assert len(reads.read_once()) == 1                    # 0 and 1 tried: 0 holds too few
    assert len(reads.read_once()) == 1                    # 1 kept, 2 tried next (0 last): too few too
    assert len(reads.read_once()) == 2                    # 1 kept, 3 tried: both read
    assert [[b.partition for b in call] for call in calls] == [[0, 1], [1, 2], [1, 3]]
    # A partition not read yet is taken to hold records of 1 kB; one read teaches its own (here 200 bytes), so the
    # next read asks for about max_bytes of records.
    assert {b.partition: b.records for b in calls[2]} == {1: 500, 3: 101}
