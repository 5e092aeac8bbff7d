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
