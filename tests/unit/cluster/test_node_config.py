import pytest

from canary.cluster import node_config
from canary.cluster.state import ClusterState, NodeState
from canary.errors import ClusterError


def _state(tmp_path, brokers=3):
    nodes = [NodeState(3000, "controller", "3.9.2", 9000)]
    nodes += [NodeState(i, "broker", "3.9.2", 9000 + i, rack=f"r{i}") for i in range(1, brokers + 1)]
    return ClusterState("id", str(tmp_path), "3.9", "320m", "192m", nodes)


def _props(text):
    return dict(line.split("=", 1) for line in text.splitlines())


def test_broker_properties(tmp_path):
    state = _state(tmp_path)
    props = _props(node_config.render(state, state.node(2)))
    assert props["process.roles"] == "broker" and props["node.id"] == "2"
    assert props["controller.quorum.voters"] == "3000@127.0.0.1:9000"
    assert props["listeners"] == props["advertised.listeners"] == "PLAINTEXT://127.0.0.1:9002"
    assert props["broker.rack"] == "r2"
    assert props["offsets.topic.replication.factor"] == "3"
    assert props["log.dirs"] == str(tmp_path / "nodes" / "2" / "data")


def test_internal_topics_fit_a_one_broker_cluster(tmp_path):
    state = _state(tmp_path, brokers=1)
    props = _props(node_config.render(state, state.node(1)))
    assert props["offsets.topic.replication.factor"] == "1"
    assert props["transaction.state.log.min.isr"] == "1"


def test_controller_properties(tmp_path):
    state = _state(tmp_path)
    props = _props(node_config.render(state, state.node(3000)))
    assert props["process.roles"] == "controller"
    assert props["listeners"] == "CONTROLLER://127.0.0.1:9000"
    assert "advertised.listeners" not in props and "broker.rack" not in props


def test_overrides_win_over_defaults(tmp_path):
    state = _state(tmp_path)
    state.node(1).config = {"num.io.threads": "9", "message.max.bytes": "1000"}
    props = _props(node_config.render(state, state.node(1)))
    assert props["num.io.threads"] == "9" and props["message.max.bytes"] == "1000"


@pytest.mark.parametrize("key", ["node.id", "listeners", "log.dirs", "broker.rack", "process.roles"])
def test_managed_keys_cannot_be_overridden(key):
    with pytest.raises(ClusterError, match="managed by the local cluster"):
        node_config.validate_overrides({key: "x"})


def test_malformed_keys_are_refused():
    with pytest.raises(ClusterError, match="is not a broker config name"):
        node_config.validate_overrides({" spaced": "x"})


def _replicating_state(tmp_path):
    state = _state(tmp_path)
    for broker in state.brokers:
        broker.replication_port = 9100 + broker.node_id
    return state


def test_brokers_replicate_on_their_own_listener(tmp_path):
    state = _replicating_state(tmp_path)
    props = _props(node_config.render(state, state.node(2)))
    assert props["listeners"] == "PLAINTEXT://127.0.0.1:9002,REPLICATION://127.0.0.1:9102"
    assert props["advertised.listeners"] == "PLAINTEXT://127.0.0.1:9002,REPLICATION://127.0.0.1:9102"
    assert props["inter.broker.listener.name"] == "REPLICATION"
    assert "REPLICATION:PLAINTEXT" in props["listener.security.protocol.map"].split(",")


def test_a_delayed_broker_advertises_its_proxy_to_clients_only(tmp_path):
    state = _replicating_state(tmp_path)
    node = state.node(2)
    node.client_delay_ms, node.proxy_port = 50.0, 9999
    props = _props(node_config.render(state, node))
    assert props["listeners"] == "PLAINTEXT://127.0.0.1:9002,REPLICATION://127.0.0.1:9102"  # it still listens itself
    assert props["advertised.listeners"] == "PLAINTEXT://127.0.0.1:9999,REPLICATION://127.0.0.1:9102"
    assert state.bootstrap_servers == "127.0.0.1:9001,127.0.0.1:9002,127.0.0.1:9003"  # never the proxy
    node.client_delay_ms = 0.0  # delay removed: a remembered proxy port is not advertised
    assert _props(node_config.render(state, node))["advertised.listeners"].startswith("PLAINTEXT://127.0.0.1:9002,")
