"""The e-processes behind the judge: valid under the null (Ville), powerful under the alternative."""

from __future__ import annotations

import math

import numpy as np

from canary.judge.stats import (
    MIN_SPREAD_BUCKETS,
    RARE_GRID,
    one_sample_log_e,
    tail_log_e,
    tail_log_rank_z,
    tail_overdispersion,
)


def tail_tables(rng, looks, n_c, n_b, hazard_c, hazard_b):
    """risk/surv (looks x steps) for two lanes walking through len(hazard) thresholds: at each, an
    observation that reached it stops with the given hazard."""
    out = []
    for n, hazard in ((n_c, hazard_c), (n_b, hazard_b)):
        risk = np.zeros((looks, len(hazard)))
        surv = np.zeros((looks, len(hazard)))
        at = np.full(looks, n)
        for j, h in enumerate(hazard):
            risk[:, j] = at
            at = at - rng.binomial(at.astype(int), h)
            surv[:, j] = at
        out += [risk, surv]
    return out


def test_tail_log_e_rarely_crosses_under_the_null_small_and_large_counts():
    rng = np.random.default_rng(11)
    hazard = [0.9] + [0.15] * 12
    for n_c, n_b in ((10, 20), (3000, 6000)):  # exact tables; binomial-bounded wide tables
        crossings = 0
        for _ in range(200):
            rc, sc, rb, sb = tail_tables(rng, 20, n_c, n_b, hazard, hazard)
            crossings += tail_log_e(rc, sc, rb, sb).max() >= math.log(20)
        assert crossings <= 10  # Ville: P(ever >= 20) <= 1/20


def test_tail_log_e_grows_when_the_canary_goes_further_in_the_tail():
    rng = np.random.default_rng(12)
    hazard_b = [0.5] + [0.2] * 12
    hazard_c = [0.5] + [0.1] * 12
    for n_c, n_b in ((20, 40), (3000, 6000)):
        rc, sc, rb, sb = tail_tables(rng, 27, n_c, n_b, hazard_c, hazard_b)
        log_e = tail_log_e(rc, sc, rb, sb)
        assert log_e.shape == (27,) and log_e[-1] >= math.log(1000)
        assert tail_log_e(rb[:, :], sb, rc * 2, sc * 2).max() < math.log(20)  # lighter canary tail


def test_tail_log_e_sees_an_entry_only_change_through_the_entry_step():
    rng = np.random.default_rng(13)
    rc, sc, rb, sb = tail_tables(rng, 27, 100, 200, [0.8] + [0.2] * 10, [0.9] + [0.2] * 10)
    assert tail_log_e(rc, sc, rb, sb)[-1] >= math.log(1000)
    assert tail_log_e(rc, sc, rb, sb, entry_weight=1e-300)[-1] < math.log(1000)


def test_tail_log_rank_z_is_standard_normal_under_the_null():
    rng = np.random.default_rng(14)
    hazard = [0.9] + [0.15] * 12
    z = np.array([tail_log_rank_z(*tail_tables(rng, 27, 100, 200, hazard, hazard)) for _ in range(400)])
    for col in z.T:
        assert abs(col.mean()) < 0.15 and 0.85 < col.std() < 1.15
        assert (col >= 2.326).mean() <= 0.03  # nominal 1 %


def test_tail_log_rank_z_is_large_for_a_heavier_canary_tail_and_none_without_information():
    rng = np.random.default_rng(15)
    z_inside, z_all = tail_log_rank_z(*tail_tables(rng, 27, 100, 200, [0.9] + [0.1] * 12, [0.9] + [0.2] * 12))
    assert z_inside >= 5 and z_all >= 4
    rc, sc, rb, sb = tail_tables(rng, 27, 100, 200, [0.9] + [0.2] * 12, [0.9] + [0.1] * 12)
    assert tail_log_rank_z(rc, sc, rb, sb)[0] <= -3  # a lighter canary tail is negative evidence
    assert tail_log_rank_z(rc[:1, :3], sc[:1, :3], rb[:1, :3], sb[:1, :3]) == (None, None)
    assert tail_log_rank_z(np.zeros((0, 3)), np.zeros((0, 3)), np.zeros((0, 3)), np.zeros((0, 3))) == (None, None)


def test_independent_messages_are_not_overdispersed_a_steady_shift_neither():
    rng = np.random.default_rng(16)
    hazard = [0.9] + [0.15] * 12
    for hazard_c in (hazard, [0.9] + [0.08] * 12):
        factors = [tail_overdispersion(*tail_tables(rng, 27, 100, 200, hazard_c, hazard))[-1] for _ in range(100)]
        assert 1 <= np.median(factors) < 1.4 and np.mean(np.array(factors) > 2) <= 0.05
    factor = tail_overdispersion(*tail_tables(rng, 27, 100, 200, hazard, hazard))
    assert np.isinf(factor[:MIN_SPREAD_BUCKETS - 1]).all() and np.isfinite(factor[MIN_SPREAD_BUCKETS - 1:]).all()


def test_a_burst_of_one_lane_s_messages_is_one_event_not_hundreds():
    # Identical lanes, but in two buckets a pause held 30 of the canary's 100 messages past every threshold.
    rng = np.random.default_rng(17)
    hazard = [0.9] + [0.15] * 12
    rc, sc, rb, sb = tail_tables(rng, 27, 100, 200, hazard, hazard)
    for b in (8, 9):
        rc[b, 1:] = rc[b, 1:] + 30
        sc[b] = sc[b] + 30
    log_e, factor = tail_log_e(rc, sc, rb, sb), tail_overdispersion(rc, sc, rb, sb)
    assert log_e.max() >= math.log(1e6)  # every message counted as independent
    assert factor.max() > 10 and (log_e / factor).max() < math.log(20)


def test_rare_event_guard_needs_two_events_at_a_tiny_tolerance():
    n = np.full(27, 100.0)
    two = np.zeros(27)
    two[[5, 20]] = 1
    assert one_sample_log_e(two, n, 1e-7, grid=RARE_GRID).max() >= math.log(1 / 3e-4)
    assert one_sample_log_e(np.eye(27)[5], n, 1e-7, grid=RARE_GRID).max() < math.log(1 / 3e-4)
    assert one_sample_log_e(np.zeros(27), n, 1e-7, grid=RARE_GRID).max() <= 0
