"""The canary's share of client traffic and the capacity rule (canary.rollout.broker.traffic), on made-up
per-broker readings."""

import pytest

from canary.observations import BrokerReading
from canary.rollout.broker.spec import TrafficSection
from canary.rollout.broker.traffic import means, share

SETTINGS = TrafficSection()
BUSY = {"bytes_in_per_s": 400_000.0, "bytes_out_per_s": 800_000.0, "produce_requests_per_s": 300.0}


def brokers(canary: dict, baseline_count: int = 3) -> dict:
    return {**{b: dict(BUSY) for b in range(1, baseline_count + 1)}, baseline_count + 1: canary}


def test_a_canary_carrying_a_baseline_brokers_traffic_has_a_fair_representative_share():
    found = share(brokers({k: v * 0.9 for k, v in BUSY.items()}), [4], SETTINGS)
    assert (found["fair"], found["representative"]) == (True, True)
    assert found["share"]["4"] == {"bytes_in_per_s": 0.9, "bytes_out_per_s": 0.9, "produce_requests_per_s": 0.9}
    assert found["baseline"]["bytes_in_per_s"] == 400_000.0
    assert "0.90–0.90× a baseline broker's client traffic (400.0 kB/s in" in found["reason"]


def test_a_canary_that_leads_nothing_is_not_fair_and_says_which_measure():
    follower = {"bytes_in_per_s": 2_000.0, "bytes_out_per_s": 0.0, "produce_requests_per_s": 20.0}
    found = share(brokers(follower), [4], SETTINGS)
    assert (found["fair"], found["representative"]) == (False, True)
    assert "broker 4 bytes in 0.01× a baseline broker's" in found["reason"]
    assert "fair is 0.50–1.50×" in found["reason"]


def test_a_canary_with_far_more_than_its_share_is_not_fair_either():
    found = share(brokers({k: v * 2 for k, v in BUSY.items()}), [4], SETTINGS)
    assert not found["fair"] and "2.00× a baseline broker's" in found["reason"]


def test_an_idle_cluster_is_not_representative_whatever_the_shares():
    probe_only = {"bytes_in_per_s": 3_000.0, "bytes_out_per_s": 3_000.0, "produce_requests_per_s": 50.0}
    found = share({1: probe_only, 2: probe_only, 3: probe_only}, [3], SETTINGS)
    assert (found["fair"], found["representative"]) == (False, False)
    assert "3.0 kB/s of client bytes in each, below the 100.0 kB/s" in found["reason"]
    # the measures the baseline does not serve (bytes below the floor) are no share at all
    assert found["share"]["3"] == {"produce_requests_per_s": 1.0}


def test_the_floor_and_tolerance_are_the_specs():
    half = {k: v * 0.6 for k, v in BUSY.items()}
    assert not share(brokers(half), [4], TrafficSection(tolerance=0.3))["fair"]
    assert share(brokers(half), [4], TrafficSection(tolerance=0.5))["fair"]
    assert not share(brokers(BUSY), [4], TrafficSection(min_bytes_per_s=1e6))["representative"]


@pytest.mark.parametrize("per_broker, canaries, lacking", [({1: BUSY, 2: BUSY}, [3], "canary"),
                                                             ({3: BUSY}, [3], "baseline")])
def test_a_lane_without_readings_is_named(per_broker, canaries, lacking):
    found = share(per_broker, canaries, SETTINGS)
    assert not found["fair"] and found["reason"] == f"no {lacking} broker's traffic could be read from its metrics"


def test_means_average_each_brokers_readings_of_the_measures_only():
    def reading(broker: int, metric: str, value: float) -> BrokerReading:
        return BrokerReading("r", "probe-1", broker, "baseline", metric, value, 1.0)

    found = means([reading(1, "bytes_in_per_s", 10.0), reading(1, "bytes_in_per_s", 30.0),
                   reading(2, "bytes_in_per_s", 5.0), reading(1, "cpu_seconds_per_s", 0.5)])
    assert found == {1: {"bytes_in_per_s": 20.0}, 2: {"bytes_in_per_s": 5.0}}


class FakeSource:
    """Broker metrics that change from one sample to the next: `rounds` of per-broker measures, the last repeated."""

    def __init__(self, rounds: list[dict]):
        self.rounds, self.samples = rounds, 0

    def sample(self):
        from canary.broker_metrics import BrokerSample

        values = self.rounds[min(self.samples, len(self.rounds) - 1)]
        self.samples += 1
        return [BrokerSample(b, m, v, 0) for b, measures in values.items() for m, v in measures.items()]


class FakeRun:
    def __init__(self, **spec):
        from types import SimpleNamespace

        self.spec = SimpleNamespace(broker_metrics=SimpleNamespace(interval=5.0),
                                    traffic=TrafficSection(**spec))
        self.said: list[str] = []

    def canary_ids(self):
        return [4]

    def partitions(self):
        return []

    def say(self, text, *args):
        self.said.append(text % args)


@pytest.fixture
def fake_metrics(monkeypatch, clock):
    from canary.rollout.broker import traffic

    def use(source):
        monkeypatch.setattr(traffic, "broker_metrics_source", lambda run: source)
        return clock
    return use


def test_the_lead_step_waits_until_the_canary_carries_its_share(fake_metrics):
    from canary.rollout.broker.traffic import wait_for_fair_share

    leading_nothing = {"bytes_in_per_s": 1_000.0, "bytes_out_per_s": 0.0, "produce_requests_per_s": 10.0}
    source = FakeSource([brokers(leading_nothing)] * 3 + [brokers(BUSY)])
    clock = fake_metrics(source)
    found = wait_for_fair_share(FakeRun())
    assert found["fair"] and source.samples == 4 and clock.now == 15.0


def test_the_lead_step_stops_waiting_at_its_bound_or_at_once_on_an_idle_cluster(fake_metrics):
    from canary.rollout.broker.traffic import wait_for_fair_share

    leading_nothing = {"bytes_in_per_s": 1_000.0, "bytes_out_per_s": 0.0, "produce_requests_per_s": 10.0}
    clock = fake_metrics(FakeSource([brokers(leading_nothing)]))
    found = wait_for_fair_share(FakeRun(wait=30.0))
    assert not found["fair"] and found["representative"] and clock.now <= 30.0
    idle = {"bytes_in_per_s": 2_000.0, "bytes_out_per_s": 2_000.0, "produce_requests_per_s": 50.0}
    source = FakeSource([{b: idle for b in (1, 2, 3, 4)}])
    clock = fake_metrics(source)
    clock.now = 0.0
    found = wait_for_fair_share(FakeRun(wait=60.0))
    assert not found["representative"] and source.samples == 2 and clock.now == 5.0


def test_the_window_judges_the_share_against_the_control_which_takes_the_same_probe():
    """The demo's window: the probe (50 messages/s per partition) sends to the canary's and the control's partitions
    only, so against the untouched brokers the canary's produce requests read 1.53×; against the control, fair."""
    per_broker = {1: {"bytes_in_per_s": 260_000.0, "bytes_out_per_s": 254_000.0, "produce_requests_per_s": 100.0},
                  2: {"bytes_in_per_s": 262_000.0, "bytes_out_per_s": 253_000.0, "produce_requests_per_s": 101.0},
                  3: {"bytes_in_per_s": 270_000.0, "bytes_out_per_s": 268_000.0, "produce_requests_per_s": 148.0},
                  4: {"bytes_in_per_s": 281_000.0, "bytes_out_per_s": 281_000.0, "produce_requests_per_s": 153.6}}
    settings = TrafficSection()
    assert not share(per_broker, [4], settings)["fair"]  # the untouched brokers: 1.53× the produce requests
    against_control = share(per_broker, [4], settings, reference=[3])
    assert against_control["fair"] and against_control["share"]["4"]["produce_requests_per_s"] == 1.038



def test_bytes_are_weighed_by_the_partitions_each_broker_leads_and_requests_shown_unweighed():
    """8 partitions over 3 brokers: the canary leads 3, the control 2. Its bytes are 1.5x the control's for 1.5x the
    partitions: fair; its produce requests' share is shown as measured."""
    per_broker = {1: dict(BUSY), 2: {k: v * 1.5 for k, v in BUSY.items() if k != "produce_requests_per_s"} | {
        "produce_requests_per_s": 310.0}, 3: dict(BUSY)}
    tight = TrafficSection(tolerance=0.2)
    unweighed = share(per_broker, [2], tight, reference=[3])
    assert not unweighed["fair"] and "bytes in 1.50×" in unweighed["reason"]
    weighed = share(per_broker, [2], tight, reference=[3], led={1: 3, 2: 3, 3: 2})
    assert weighed["fair"] and weighed["leads"] == {"2": 1.5}
    assert weighed["share"]["2"] == {"bytes_in_per_s": 1.0, "bytes_out_per_s": 1.0, "produce_requests_per_s": 1.033}
    same = share(per_broker, [2], SETTINGS, reference=[3], led={2: 2, 3: 2})
    assert "leads" not in same and same["share"]["2"]["bytes_in_per_s"] == 1.5


@pytest.mark.parametrize(("canary_leads", "control_leads", "requests", "fair"), [
    (3, 2, 1.51, True),   # the plain fleet's broker 3 with ProducerPerformance: one request per partition's batch
    (2, 3, 0.76, True),   # broker 2 there: fewer partitions, fewer requests
    (3, 2, 1.0, True),    # a busy producer: one request per broker per send, whatever it leads
    (3, 2, 2.3, False),   # beyond 1.5 x 1.5
    (3, 2, 0.45, False),  # below the unweighed range: more partitions never mean fewer requests
    (2, 2, 1.51, False),  # leading as many as the control, it is held to the plain tolerance
])
def test_produce_requests_are_fair_between_the_unweighed_and_the_leadership_weighed_share(
        canary_leads, control_leads, requests, fair):
    """A light producer sends about one request per partition's batch, a busy one one per broker per send, so the
    canary's produce-request share is fair anywhere between the two expectations."""
    weight = canary_leads / control_leads
    canary = {"bytes_in_per_s": BUSY["bytes_in_per_s"] * weight, "bytes_out_per_s": BUSY["bytes_out_per_s"] * weight,
              "produce_requests_per_s": BUSY["produce_requests_per_s"] * requests}
    result = share({1: dict(BUSY), 2: canary, 3: dict(BUSY)}, [2], SETTINGS, reference=[3],
                   led={1: 3, 2: canary_leads, 3: control_leads})
    assert result["fair"] is fair, result["reason"]
    assert result["share"]["2"]["produce_requests_per_s"] == pytest.approx(requests)
    if canary_leads != control_leads:
        low, high = result["fair_requests"]["2"]
        assert (low, high) == pytest.approx((0.5 * min(1, weight), 1.5 * max(1, weight)), abs=1e-3)
        if not fair:
            assert f"produce requests {requests:.2f}× a baseline broker's (fair for what it leads" in result["reason"]
    else:
        assert "fair_requests" not in result
