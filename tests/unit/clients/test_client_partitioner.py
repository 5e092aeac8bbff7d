import zlib
from collections import Counter

import pytest
from client_fakes import lanes_of

from canary.clients import LanePartitioner, TopicLanes, candidates, keyed_partition
from canary.clients.partitioner import UNASSIGNED


def test_a_partitions_lane_is_its_leaders_lane(six_partitions):
    assert six_partitions.partitions("canary") == (2, 5)
    assert six_partitions.partitions("baseline") == (0, 1, 3, 4)
    assert six_partitions.lane_of(5) == "canary" and six_partitions.leader_of(5) == 3


def test_a_leaderless_partition_is_in_no_lane():
    lanes = lanes_of("t", {0: 1, 1: None, 2: 3, 3: -1})
    assert lanes.lane_of(1) is None and lanes.lane_of(3) is None and lanes.leader_of(3) is None
    assert lanes.partitions("canary") == (2,) and lanes.partitions("baseline") == (0,)
    assert lanes.all == (0, 1, 2, 3) and lanes.led == (0, 2)


@pytest.mark.parametrize("lane,own", [("canary", (2, 5)), ("baseline", (0, 1, 3, 4))])
def test_each_lane_chooses_only_its_own_partitions(six_partitions, lane, own):
    partitioner = LanePartitioner(lane)
    keyless = Counter(partitioner.choose(six_partitions).partition for _ in range(400))
    keyed = {partitioner.choose(six_partitions, f"k{i}").partition for i in range(400)}
    assert set(keyless) == set(own) and keyed == set(own)
    assert max(keyless.values()) - min(keyless.values()) <= 1  # round robin: even
    assert not any(partitioner.choose(six_partitions, k).fallback for k in (None, "a", b"b"))
    assert candidates(six_partitions, lane) == (own, False)


def test_a_key_stays_on_one_partition_across_calls_instances_and_key_types(six_partitions):
    first = {f"customer-{i}": LanePartitioner("baseline").choose(six_partitions, f"customer-{i}").partition
             for i in range(200)}
    again = LanePartitioner("baseline")
    assert all(again.choose(six_partitions, key).partition == p for key, p in first.items())
    assert all(again.choose(six_partitions, key.encode()).partition == p for key, p in first.items())
    # CRC32 over the lane's sorted partitions: a fixed, documented function of the key
    assert keyed_partition("customer-7", (0, 1, 3, 4)) == (0, 1, 3, 4)[zlib.crc32(b"customer-7") % 4]


def test_a_key_moves_when_its_lanes_partition_set_changes(six_partitions):
    # the documented trade-off: broker 3 stops leading partition 5, the canary lane shrinks to one partition
    before = {k: LanePartitioner("canary").choose(six_partitions, k).partition for k in map(str, range(100))}
    shrunk = lanes_of("orders", {**six_partitions.leaders, 5: 1})
    after = {k: LanePartitioner("canary").choose(shrunk, k).partition for k in before}
    assert set(before.values()) == {2, 5} and set(after.values()) == {2}
    assert all(after[k] == before[k] for k in before if before[k] == 2)  # keys on the kept partition stay


def test_no_canary_partition_falls_back_to_every_led_partition():
    lanes = lanes_of("t", {0: 1, 1: 2, 2: 1, 3: None})  # no canary broker leads anything; 3 has no leader
    partitioner = LanePartitioner("canary")
    choices = [partitioner.choose(lanes, None) for _ in range(30)] + [partitioner.choose(lanes, str(i))
                                                                     for i in range(60)]
    assert all(c.fallback for c in choices)
    assert {c.partition for c in choices} == {0, 1, 2}
    assert candidates(lanes, "canary") == ((0, 1, 2), True)
    # the baseline lane is unaffected
    assert not LanePartitioner("baseline").choose(lanes).fallback


def test_a_baseline_producer_falls_back_too_when_only_canary_brokers_lead():
    lanes = lanes_of("t", {0: 3, 1: 3})
    choice = LanePartitioner("baseline").choose(lanes, "k")
    assert choice.fallback and choice.partition in (0, 1) and choice.leader == 3


def test_no_leader_anywhere_falls_back_to_every_partition_and_no_partition_known_leaves_it_to_librdkafka():
    assert candidates(lanes_of("t", {0: None, 1: None}), "canary") == ((0, 1), True)
    choice = LanePartitioner("canary").choose(TopicLanes.missing("t"), "k")
    assert choice.partition == UNASSIGNED and choice.fallback and choice.leader is None
