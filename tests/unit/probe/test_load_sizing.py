"""`load: {rate: auto}`: what the cluster's own client traffic lacks to be representative, within a ceiling, and
nothing on a busy cluster; sized from measured means, never by pushing the cluster."""

from __future__ import annotations

from canary.probe.load_sizing import MAX_BUSY, size_load

FLOOR = 100_000.0
CEILING = 2_000_000.0


def brokers(bytes_in: float, idle: float = 0.95, count: int = 3) -> dict:
    return {b: {"bytes_in_per_s": bytes_in, "request_handler_idle_ratio": idle} for b in range(1, count + 1)}


def test_an_idle_cluster_gets_twice_the_representative_floor():
    sized = size_load(brokers(2_000.0), FLOOR, 1000, CEILING)
    assert (sized.rate, sized.bytes_per_s_per_broker, sized.target_bytes_per_s) == (198.0, 198_000.0, 200_000.0)
    assert (sized.measured_bytes_in_per_s, sized.busiest_handler_busy) == (2_000.0, 0.05)
    assert sized.rule == "198.0 kB/s per broker: the brokers take 2.0 kB/s of client bytes in each, and " \
                         "representative traffic with margin is 200.0 kB/s"


def test_real_traffic_already_representative_needs_no_load():
    sized = size_load(brokers(350_000.0), FLOOR, 1000, CEILING)
    assert sized.rate == 0 and sized.rule.startswith("no load: the brokers already take 350.0 kB/s")


def test_the_load_never_passes_its_ceiling():
    sized = size_load(brokers(0.0), 10 * FLOOR, 500, 300_000.0)
    assert sized.bytes_per_s_per_broker == 300_000.0 and sized.rate == 600.0
    assert "(the ceiling)" in sized.rule


def test_a_busy_cluster_gets_no_synthetic_load():
    sized = size_load({**brokers(2_000.0), 4: {"bytes_in_per_s": 2_000.0, "request_handler_idle_ratio": 0.3}},
                      FLOOR, 1000, CEILING)
    assert sized.rate == 0 and sized.busiest_handler_busy == 0.7
    assert f"{MAX_BUSY:.0%} a synthetic load may be added to" in sized.rule


def test_unread_metrics_give_twice_the_floor_within_the_ceiling():
    sized = size_load({}, FLOOR, 1000, 150_000.0)
    assert sized.rate == 150.0 and sized.measured_bytes_in_per_s is None
    assert "could not be read" in sized.rule


def test_nothing_when_capacity_is_not_judged():
    sized = size_load(brokers(0.0), FLOOR, 1000, CEILING, required=False)
    assert sized.rate == 0 and "capacity: not_required" in sized.rule
