import pytest

from canary.rollout import guard
from canary.rollout.guard import PartitionView, decide, isr_headroom, learners_missing, not_in_isr


def part(name, replicas, isr, min_isr, leader=None):
    topic, _, p = name.rpartition("-")
    return PartitionView(topic, int(p), tuple(replicas), tuple(isr), replicas[0] if leader is None else leader,
                         min_isr)


def test_full_isr_allows_a_restart():
    d = decide(2, [part("t-0", [1, 2, 3], [1, 2, 3], 2), part("t-1", [2, 3, 1], [2, 3, 1], 2)])
    assert d.allowed and d.reasons == []


def test_restart_that_would_drop_below_min_isr_is_refused():
    d = decide(2, [part("t-0", [1, 2, 3], [1, 2], 2), part("u-0", [3, 1, 2], [3, 1, 2], 2)])
    assert not d.allowed
    assert d.reasons == ["t-0 would drop below min.insync.replicas (ISR [1, 2], min 2)"]
    assert "broker 2 may not restart: t-0 would drop" in d.reason()


def test_partition_already_below_min_isr_is_refused_even_if_broker_is_out_of_isr():
    d = decide(3, [part("t-0", [1, 2, 3], [1], 2)])
    assert not d.allowed and "already below" in d.reasons[0]


def test_other_brokers_partitions_do_not_matter():
    assert decide(4, [part("t-0", [1, 2, 3], [1], 2)]).allowed


def test_broker_outside_isr_may_restart_when_the_rest_keep_min_isr():
    assert decide(3, [part("t-0", [1, 2, 3], [1, 2], 2)]).allowed


def test_min_isr_not_below_replication_factor_warns_instead_of_blocking():
    d = decide(1, [part("single-0", [1], [1], 1), part("strict-0", [1, 2], [1, 2], 2)])
    assert d.allowed and len(d.warnings) == 2


def test_a_broker_known_to_be_down_does_not_count_in_the_isr():
    # A crashed broker stays in the reported ISR until the controller fences it; the deployer already knows.
    parts = [part("t-0", [1, 2, 3], [1, 2, 3], 2)]
    assert decide(2, parts).allowed
    d = decide(2, parts, down={1})
    assert not d.allowed
    assert d.reasons == ["t-0 would drop below min.insync.replicas (ISR [2, 3] without broker(s) [1], which are down, "
                         "min 2)"]
    assert not decide(3, [part("t-0", [1, 2, 3], [1, 2], 2)], down={1}).allowed  # already below without it


def test_reason_abbreviates_many_partitions():
    parts = [part(f"t-{i}", [1, 2, 3], [1, 2], 2) for i in range(9)]
    assert decide(1, parts).reason(limit=3).endswith("and 6 more")


def test_not_in_isr_lists_the_partitions_a_learner_still_catches_up():
    parts = [part("t-0", [1, 2, 3], [1, 2], 2), part("t-1", [3, 1, 2], [3, 1, 2], 2), part("t-2", [1, 2], [1, 2], 1)]
    assert not_in_isr(3, parts) == ["t-0"]
    assert not_in_isr(1, parts) == []


def test_learners_missing_names_an_unregistered_broker_before_reading_any_partition():
    def unread():
        raise AssertionError("the partitions are read only for a registered broker")
    assert learners_missing({1, 2}, unread, [3]) == "broker 3 not registered yet"


def test_learners_missing_reads_the_partitions_once_for_all_the_brokers():
    reads = []
    parts = [PartitionView("t", 0, (1, 2, 3), (1, 2, 3), 1, 2), PartitionView("t", 1, (2, 3, 1), (2, 1), 2, 2)]
    assert learners_missing({1, 2, 3}, lambda: reads.append(1) or parts, [1, 2, 3]) == (
        "broker 3 not yet in the ISR of 1 partition(s): ['t-1']")
    assert learners_missing({1, 2, 3}, lambda: reads.append(1) or parts, [1, 2]) is None
    assert len(reads) == 2


def test_isr_headroom_is_the_fewest_in_sync_replicas_above_min_isr_where_a_restart_can_keep_it():
    parts = [PartitionView("t", 0, (1, 2, 3), (1, 2, 3), 1, 2), PartitionView("t", 1, (2, 3, 1), (2,), 2, 2),
             PartitionView("u", 0, (1, 2), (1,), 1, 2)]  # min ISR = RF: left out
    assert isr_headroom(parts) == -1 and isr_headroom(parts[:1]) == 1 and isr_headroom(parts[2:]) is None


@pytest.mark.parametrize("voters, lagging, node, refused", [
    ([3000], [3000], 3000, None),                      # one voter: its restart pauses the metadata log, allowed
    ([3000, 3001, 3002], [], 3001, None),              # the two others caught up: a majority of three
    ([3000, 3001, 3002], [3001], 3001, None),          # the lagging one itself may go: the two others remain
    ([3000, 3001, 3002], [3002], 3001,
     "restarting controller 3001 would leave 1 of 3 voters caught up, fewer than the 2 the quorum needs; voters "
     "[3002] are not caught up with the quorum"),
    ([1, 2, 3, 4, 5], [4], 5, None),                   # five voters, one behind: three of five remain
    ([1, 2, 3, 4, 5], [3, 4], 5, "restarting controller 5 would leave 2 of 5 voters caught up"),
], ids=["single", "all-caught-up", "itself-lagging", "another-lagging", "five-one-behind", "five-two-behind"])
def test_a_controller_restarts_only_while_a_caught_up_majority_remains(voters, lagging, node, refused):
    reason = guard.quorum_refuses(voters, lagging, node)
    assert reason == refused if refused is None else reason.startswith(refused), reason
