"""The KIP-848 migration canary's pure disruption parts (canary.clients.rebalance): accounting from recorded
callbacks, the lane comparison and the combined verdict."""

from __future__ import annotations

import pytest

from canary.clients.rebalance import RebalanceEvent, account, combine, compare

B, C = "baseline", "canary"


def ev(at: float, instance: str, kind: str, *partitions: int) -> RebalanceEvent:
    return RebalanceEvent(at, instance, C if "canary" in instance else B, kind, partitions)  # type: ignore[arg-type]


# Recorded shape of a real run (eager classic baseline, KIP-848 canary): b0 restarts at t=20.
EAGER_AND_CONSUMER = [
    ev(0, "b0#1", "assigned", 0, 1), ev(0, "b1#1", "assigned", 2, 3), ev(0, "b2#1", "assigned", 4, 5),
    # the canary joins before the window: b1 gives up 3 (not counted, before start)
    ev(5, "b1#1", "revoked", 2, 3), ev(5.2, "b1#1", "assigned", 2), ev(9, "x-canary#1", "assigned", 3),
    # window from 10: b0 closes (its own revocation is not a disruption)
    ev(20, "b0#1", "closing"), ev(20, "b0#1", "revoked", 0, 1),
    ev(20.1, "x-canary#1", "assigned", 0),                      # incremental: nothing taken away
    ev(20.6, "b1#1", "revoked", 2), ev(20.6, "b2#1", "revoked", 4, 5),      # eager: everything
    ev(20.8, "b1#1", "assigned", 1, 2), ev(20.9, "b2#1", "assigned", 4, 5),  # 2, 4, 5 never moved
    ev(22, "b0#2", "assigned"),                                 # empty callback: not counted
    ev(24, "b1#1", "revoked", 1, 2), ev(24, "b2#1", "revoked", 4, 5),
    ev(24.5, "b1#1", "assigned", 1), ev(24.5, "b2#1", "assigned", 4, 5),    # 1, 4, 5 back; 2 goes to b0
    ev(25, "b0#2", "assigned", 2),
]


def test_accounting_counts_revocations_needless_ones_pauses_and_callbacks_per_lane():
    lanes = account(EAGER_AND_CONSUMER, start=10, end=40, slots={B: 3, C: 1})
    canary, baseline = lanes[C], lanes[B]
    assert [i.instance for i in canary.instances] == ["x-canary#1"]
    assert (canary.total("revoked"), canary.total("needless"), canary.total("callbacks")) == (0, 0, 1)
    assert canary.total("pause_s") == 0
    by = {i.instance: i for i in baseline.instances}
    assert set(by) == {"b0#1", "b0#2", "b1#1", "b2#1"}
    assert (by["b0#1"].revoked, by["b0#1"].callbacks) == (0, 0)          # its own close
    assert (by["b1#1"].revoked, by["b1#1"].needless) == (3, 2)            # 2 at 20.6, then 1 at 24 (2 moved)
    assert (by["b2#1"].revoked, by["b2#1"].needless) == (4, 4)
    assert by["b1#1"].pause_s == pytest.approx(0.2 + 0.5)
    assert by["b2#1"].pause_s == pytest.approx(0.3 + 0.5) and by["b2#1"].pauses == 2
    assert by["b0#2"].callbacks == 1 and by["b0#2"].pause_s == 0          # a first assignment is no pause
    assert baseline.per_instance("revoked") == pytest.approx(7 / 3)
    assert baseline.per_instance("needless") == pytest.approx(2)


def test_a_pause_still_open_ends_at_the_window_end_and_events_before_the_window_only_build_state():
    events = [ev(0, "b0#1", "assigned", 0), ev(5, "b0#1", "revoked", 0), ev(8, "b1#1", "assigned", 0)]
    lanes = account(events, start=6, end=10, slots={B: 2, C: 0})
    b0 = {i.instance: i for i in lanes[B].instances}
    assert "b0#1" not in b0  # nothing of it inside the window
    assert account(events, start=4, end=10, slots={B: 2})[B].instances[0].pause_s == pytest.approx(5)


def test_lost_partitions_count_as_revoked_and_moved_partitions_are_not_needless():
    events = [ev(0, "b0#1", "assigned", 0, 1), ev(1, "b0#1", "lost", 0, 1), ev(2, "b1#1", "assigned", 0),
              ev(3, "b0#1", "assigned", 1)]
    b0 = {i.instance: i for i in account(events, 0, 5, {B: 2})[B].instances}["b0#1"]
    assert (b0.revoked, b0.needless, b0.callbacks) == (2, 1, 3)  # 0 moved to b1, 1 came back untouched
    assert b0.pause_s == pytest.approx(2)


def test_the_canary_regresses_only_beyond_both_floors():
    events = [ev(0, "b0#1", "assigned", 0, 1), ev(0, "x-canary#1", "assigned", 2, 3),
              ev(11, "x-canary#1", "revoked", 2, 3), ev(14, "x-canary#1", "assigned", 2, 3),
              ev(12, "b0#1", "revoked", 1), ev(12.5, "b9#1", "assigned", 1)]
    result = compare(account(events, 10, 30, {B: 1, C: 1}), disturbances=1)
    decisions = {m["name"]: m["decision"] for m in result["metrics"]}
    assert result["verdict"] == "ROLLBACK"
    # canary: 2 revoked, 2 needless, 3 s paused, 2 callbacks; baseline b0: 1 revoked, 0 needless, 0 s, 1 + b9's 1
    assert decisions == {"revoked_per_instance": "PASS", "needless_per_instance": "FAIL",
                         "pause_s_per_instance": "FAIL", "callbacks_per_instance": "PASS"}
    assert "needless_per_instance" in result["reason"]


def test_the_eager_baseline_against_a_consumer_canary_promotes():
    result = compare(account(EAGER_AND_CONSUMER, 10, 40, {B: 3, C: 1}), disturbances=1)
    assert result["verdict"] == "PROMOTE"
    assert all(m["decision"] == "PASS" for m in result["metrics"])


@pytest.mark.parametrize("disturbances,events,why", [
    (0, EAGER_AND_CONSUMER, "0 disturbance(s) completed"),
    (1, [ev(0, "b0#1", "assigned", 0), ev(0, "x-canary#1", "assigned", 1)], "did not rebalance"),
])
def test_too_few_events_is_inconclusive_never_a_pass(disturbances, events, why):
    result = compare(account(events, 10, 40, {B: 3, C: 1}), disturbances=disturbances)
    assert result["verdict"] == "INCONCLUSIVE" and why in result["reason"]
    assert {m["decision"] for m in result["metrics"]} == {"INSUFFICIENT_DATA"}


def test_a_lane_without_instances_is_inconclusive():
    assert compare(account(EAGER_AND_CONSUMER, 10, 40, {B: 3, C: 0}), 1)["verdict"] == "INCONCLUSIVE"


@pytest.mark.parametrize("disruption,judged,want", [
    ("PROMOTE", "PROMOTE", "PROMOTE"), ("ROLLBACK", "PROMOTE", "ROLLBACK"), ("PROMOTE", "INCONCLUSIVE", "INCONCLUSIVE"),
    ("INCONCLUSIVE", "ROLLBACK", "ROLLBACK"),
])
def test_the_verdicts_combine_worst_first(disruption, judged, want):
    verdict, reason = combine({"verdict": disruption, "reason": "d"}, {"verdict": judged, "reason": "j"})
    assert verdict == want and reason
