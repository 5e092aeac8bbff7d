import pytest

from canary.lanes import broker_lane, canary_rack, client_lane, real_rack


@pytest.mark.parametrize("rack,lane", [
    ("canary-broker", "canary"), ("eu-1a:canary-broker", "canary"), ("a", "baseline"), (None, "baseline"),
    ("", "baseline"), ("canary-brokers", "baseline"), ("canary-broker:a", "baseline"),
])
def test_broker_lane(rack, lane):
    assert broker_lane(rack) == lane


def test_marker_is_configurable(monkeypatch):
    monkeypatch.setenv("KAFKA_CANARY_MARKER", "pod-canary")
    assert broker_lane("x:pod-canary") == "canary"
    assert broker_lane("canary-broker") == "baseline"


def test_real_rack_and_canary_rack_round_trip():
    assert real_rack("eu-1a:canary-broker") == "eu-1a"
    assert real_rack("canary-broker") is None
    assert canary_rack("eu-1a") == "eu-1a:canary-broker"
    assert broker_lane(canary_rack(None)) == "canary"


@pytest.mark.parametrize("client_id,lane", [
    ("orders-canary-broker-1", "canary"), ("orders.canary-broker", "canary"), ("orders-1", "baseline"),
    ("orders-canary-brokerx", "baseline"), (None, "baseline"),
])
def test_client_lane(client_id, lane):
    assert client_lane(client_id) == lane
