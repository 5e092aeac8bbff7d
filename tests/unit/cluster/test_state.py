import json

import pytest

from canary.cluster.state import ClusterState, NodeState
from canary.errors import ClusterStateError, UnknownNodeError


def _state(tmp_path):
    return ClusterState("cid", str(tmp_path), "3.9", "320m", "192m", [
        NodeState(3000, "controller", "3.9.2", 9000),
        NodeState(1, "broker", "3.9.2", 9001, rack="a", config={"k": "v"}, pid=42, pid_start=7),
        NodeState(2, "broker", "4.1.2", 9002),
    ])


def test_state_round_trips_through_the_file(tmp_path):
    state = _state(tmp_path)
    state.save()
    loaded = ClusterState.load(tmp_path)
    assert loaded == state
    assert loaded.bootstrap_servers == "127.0.0.1:9001,127.0.0.1:9002"
    assert loaded.quorum_voters == "3000@127.0.0.1:9000"
    assert not list(tmp_path.glob("*.tmp"))


def test_unknown_node_names_the_known_ids(tmp_path):
    with pytest.raises(UnknownNodeError, match="no broker with id 7; its broker ids are 1, 2"):
        _state(tmp_path).node(7, "broker")
    with pytest.raises(UnknownNodeError):
        _state(tmp_path).node(3000, "broker")


def test_missing_state_file_says_how_to_start_a_cluster(tmp_path):
    with pytest.raises(ClusterStateError, match="cluster up --dir"):
        ClusterState.load(tmp_path)


def test_state_file_of_another_schema_is_refused(tmp_path):
    (tmp_path / "cluster.json").write_text(json.dumps({"schema": 99}))
    with pytest.raises(ClusterStateError, match="schema 99"):
        ClusterState.load(tmp_path)


def test_fault_fields_round_trip_and_older_files_load_with_defaults(tmp_path):
    state = _state(tmp_path)
    broker = state.node(1)
    broker.replication_port, broker.client_delay_ms, broker.proxy_port = 9101, 50.0, 9201
    broker.proxy_pid, broker.proxy_pid_start = 43, 8
    state.save()
    assert ClusterState.load(tmp_path) == state
    assert ClusterState.load(tmp_path).node(1).advertised_port == 9201

    raw = json.loads((tmp_path / "cluster.json").read_text())
    for node in raw["nodes"]:  # a schema-1 file from before fault injection
        for key in ("replication_port", "client_delay_ms", "proxy_port", "proxy_pid", "proxy_pid_start"):
            del node[key]
    (tmp_path / "cluster.json").write_text(json.dumps(raw))
    old = ClusterState.load(tmp_path).node(1)
    assert (old.replication_port, old.client_delay_ms, old.proxy_port, old.proxy_pid) == (None, 0.0, None, None)
    assert old.advertised_port == old.port == 9001
