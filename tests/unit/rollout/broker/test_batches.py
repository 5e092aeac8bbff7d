"""The promotion's batch planner and the safe-roll guard on a set of brokers, pure, over crafted placements."""

from __future__ import annotations

import pytest

from canary.lanes import canary_rack
from canary.rollout.broker.batches import plan_batches
from canary.rollout.guard import PartitionView, decide

RACKS = {1: "a", 2: "a", 3: "b", 4: "b", 5: "c", 6: "c"}


def rack_aware(partitions: int = 6, min_isr: int = 2) -> list[PartitionView]:
    """RF 3 over racks a, b, c: one replica in each rack."""
    by_rack = [[1, 2], [3, 4], [5, 6]]
    views = []
    for p in range(partitions):
        replicas = tuple(by_rack[(p + r) % 3][p % 2] for r in range(3))
        views.append(PartitionView("orders", p, replicas, replicas, replicas[0], min_isr))
    return views


def round_robin(brokers: int = 6, partitions: int = 6, rf: int = 3, min_isr: int = 2) -> list[PartitionView]:
    """Partition p on brokers p+1, p+2, p+3 (mod `brokers`), no racks."""
    views = []
    for p in range(partitions):
        replicas = tuple((p + k) % brokers + 1 for k in range(rf))
        views.append(PartitionView("t", p, replicas, replicas, replicas[0], min_isr))
    return views


def brokers_of(plan) -> list[list[int]]:
    return [list(b.brokers) for b in plan.batches]


def test_a_rack_goes_together_when_every_partition_keeps_one_replica_per_other_rack():
    plan = plan_batches([1, 2, 3, 4, 5, 6], RACKS, rack_aware(), max_batch=3)
    assert brokers_of(plan) == [[1, 2], [3, 4], [5, 6]]
    assert [b.rack for b in plan.batches] == ["a", "b", "c"] and plan.notes == []


def test_batches_never_exceed_the_maximum_nor_mix_racks():
    assert brokers_of(plan_batches([1, 2, 3, 4, 5, 6], RACKS, rack_aware(), max_batch=1)) == [[1], [2], [3], [4],
                                                                                             [5], [6]]
    placement = [PartitionView("t", 0, (1, 3), (1, 3), 1, 1)]  # brokers 2, 4, 5, 6 host nothing
    assert brokers_of(plan_batches([2, 4, 5, 6], RACKS, placement, max_batch=4)) == [[2], [4], [5, 6]]


def test_with_headroom_one_no_batch_larger_than_one_is_safe_at_rf_3_and_min_isr_2():
    plan = plan_batches([1, 2, 3, 4, 5, 6], RACKS, rack_aware(), max_batch=3, headroom=1)
    assert brokers_of(plan) == [[1], [2], [3], [4], [5], [6]]
    decision = decide([1, 2], rack_aware(), headroom=1)
    assert not decision.allowed and decision.reason().startswith(
        "brokers [1, 2] together may not restart: orders-0 would drop below min.insync.replicas + headroom (ISR [1, "
        "3, 5], min 2 + headroom 1)")
    assert decide(1, rack_aware(), headroom=1).allowed  # one broker alone: min ISR only, a serial roll stays possible


def test_without_racks_brokers_that_share_no_partition_go_together():
    plan = plan_batches([1, 2, 3, 4, 5, 6], {}, round_robin(), max_batch=2)
    assert brokers_of(plan) == [[1, 4], [2, 5], [3, 6]]
    assert not decide([1, 2], round_robin()).allowed


def test_a_broker_already_down_is_started_first_and_alone():
    plan = plan_batches([1, 2, 3, 4, 5, 6], RACKS, rack_aware(), max_batch=3, down={4})
    assert brokers_of(plan) == [[4], [1, 2], [3], [5, 6]]
    assert plan.notes == ["broker 4 is down: started first, alone (starting it takes nothing from any ISR)"]


def test_a_partition_short_now_is_named_and_the_plan_assumes_whole_isrs():
    views = rack_aware()
    views[0] = PartitionView("orders", 0, views[0].replicas, views[0].replicas[:2], views[0].leader, 2)
    plan = plan_batches([1, 2, 3, 4, 5, 6], RACKS, views, max_batch=2)
    assert brokers_of(plan) == [[1, 2], [3, 4], [5, 6]]
    assert plan.notes == ["1 partition(s) not fully replicated now (orders-0): a batch hosting one waits until the "
                          "guard allows it"]
    assert not decide([1], views).allowed  # at the batch's start the guard still decides on the ISR as it is


def test_a_partition_already_below_min_isr_is_named_apart_and_its_brokers_wait():
    views = rack_aware()
    views[0] = PartitionView("orders", 0, views[0].replicas, views[0].replicas[:1], views[0].leader, 2)
    plan = plan_batches([1, 2, 3, 4, 5, 6], RACKS, views, max_batch=2)
    assert plan.notes == ["1 partition(s) already below min.insync.replicas (orders-0): acks=all writes to them fail "
                          "now; no broker they live on restarts until their ISR is back at min ISR"]
    assert not any(decide([b], views).allowed for b in views[0].replicas)


def test_min_isr_equal_to_the_replication_factor_is_named_and_does_not_block_batches():
    plan = plan_batches([1, 2, 3, 4, 5, 6], RACKS, rack_aware(min_isr=3), max_batch=2)
    assert brokers_of(plan) == [[1, 2], [3, 4], [5, 6]]
    assert plan.notes[0].startswith("6 partition(s) with min.insync.replicas ≥ replication factor (orders-0, ")


def test_a_running_broker_the_metadata_does_not_show_is_named():
    plan = plan_batches([1, 2, 3], RACKS, rack_aware(), max_batch=2, registered={1, 2})
    assert plan.notes == ["broker 3 runs but is not registered (starting, or recovering its logs): its batch waits "
                          "for it, with progress"]


def test_a_canary_broker_is_grouped_by_its_real_rack_and_plans_chain():
    racks = {**RACKS, 2: canary_rack("a")}
    plan = plan_batches([1, 3, 4, 5, 6], racks, rack_aware(), max_batch=3).then(
        plan_batches([2], racks, rack_aware(), max_batch=3))
    assert brokers_of(plan) == [[1], [3, 4], [5, 6], [2]] and plan.batches[-1].rack == "a"
    assert plan.lines()[:2] == ["4 batch(es) of at most 3 broker(s), headroom 0 above min.insync.replicas:",
                                "  1. brokers [1] (rack a)"]


def test_a_batch_of_none_is_refused():
    with pytest.raises(ValueError, match="max_batch must be at least 1"):
        plan_batches([1], {}, [], max_batch=0)
