"""The waves a promotion's batches are cut into (canary.rollout.broker.waves): pure, over crafted plans."""

from __future__ import annotations

import pytest

from canary.rollout.broker.batches import Batch, BatchPlan
from canary.rollout.broker.waves import plan_waves, wave_lines, wave_sizes


def plan(*batches: tuple[int, ...]) -> BatchPlan:
    return BatchPlan([Batch(b, None) for b in batches], max(len(b) for b in batches), 0)


def brokers(waves) -> list[list[int]]:
    return [w.brokers for w in waves]


def test_twelve_brokers_one_at_a_time_in_quarter_half_and_the_rest():
    waves = plan_waves(plan(*[(b,) for b in range(1, 13)]), ["25%", "50%", "all"])
    assert brokers(waves) == [[1, 2, 3], [4, 5, 6], [7, 8, 9, 10, 11, 12]]
    assert [w.number for w in waves] == [1, 2, 3]


def test_a_wave_ends_with_a_whole_batch_so_it_may_go_past_its_share():
    waves = plan_waves(plan((1, 2), (3, 4), (5, 6), (7,)), ["25%", "50%", "all"])
    assert brokers(waves) == [[1, 2], [3, 4], [5, 6, 7]]


def test_a_share_reached_already_adds_no_wave():
    waves = plan_waves(plan((1, 2, 3), (4,), (5,), (6,)), ["10%", "25%", "50%", "all"])
    assert brokers(waves) == [[1, 2, 3], [4, 5, 6]]  # the first batch reached 25 % and 50 % as well


def test_the_first_wave_is_at_least_one_batch_and_shares_below_all_leave_a_last_wave():
    waves = plan_waves(plan((1,), (2,), (3,)), ["1%", "50%"])
    assert brokers(waves) == [[1], [2], [3]]


def test_all_at_once_is_one_wave():
    assert brokers(plan_waves(plan((1,), (2,), (3,)), ["all"])) == [[1, 2, 3]]
    assert wave_lines(plan_waves(plan((1,), (2,)), ["all"]), 60) == ["one wave: every batch in turn, no look between"]


@pytest.mark.parametrize(("fleet", "sizes"), [(3, ["all"]), (5, ["all"]), (6, ["25%", "50%", "all"]),
                                              (50, ["25%", "50%", "all"])])
def test_auto_waves_from_six_brokers_on(fleet, sizes):
    assert wave_sizes("auto", fleet) == sizes
    assert wave_sizes(["10%", "all"], fleet) == ["10%", "all"]


def test_the_lines_name_each_wave_and_the_look():
    lines = wave_lines(plan_waves(plan((1,), (2,), (3,), (4,)), ["25%", "all"]), 60)
    assert lines == ["2 waves (a look of 60 s after each wave but the last):", "  wave 1: brokers [1]",
                     "  wave 2: brokers [2, 3, 4]"]
