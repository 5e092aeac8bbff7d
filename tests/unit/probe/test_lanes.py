import pytest

from canary.lanes import broker_lane, canary_client_id, canary_rack, client_lane, config_lane, real_rack


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
    ("orders-canary-1", "canary"), ("orders.canary", "canary"), ("canary", "canary"), ("billing:canary_2", "canary"),
    ("orders-canary-broker-1", "canary"), ("orders-1", "baseline"), ("orders-canaryx", "baseline"),
    ("canaries", "baseline"), ("", "baseline"), (None, "baseline"),
])
def test_client_lane(client_id, lane):
    assert client_lane(client_id) == lane


def test_client_marker_is_configurable_apart_from_the_broker_marker(monkeypatch):
    monkeypatch.setenv("KAFKA_CANARY_CLIENT_MARKER", "blue-green")
    assert client_lane("orders-blue-green-1") == "canary"
    assert client_lane("orders-canary-1") == "baseline"
    assert client_lane("orders-blue-1") == "baseline"  # every token of the marker, consecutively
    assert broker_lane("canary-broker") == "canary"  # the broker marker is its own setting


def test_config_lane_reads_client_id_then_group_instance_id():
    assert config_lane({"client.id": "orders-canary"}) == "canary"
    assert config_lane({"client.id": "orders", "group.instance.id": "orders-canary-0"}) == "canary"
    assert config_lane({"client.id": "orders", "group.instance.id": "orders-0"}) == "baseline"
    assert config_lane({}) == "baseline"


def test_canary_client_id_marks_once():
    assert canary_client_id("orders-1") == "orders-1-canary"
    assert canary_client_id("orders-canary-1") == "orders-canary-1"
    assert canary_client_id("") == "canary"
    assert client_lane(canary_client_id("orders")) == "canary"
