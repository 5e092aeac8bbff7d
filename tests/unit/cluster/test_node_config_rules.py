"""The one rule for broker config overrides: keys are config names, values one line that does not end in a backslash
(which would join the next line to it); managed keys unreachable."""

import pytest

from canary.cluster import node_config
from canary.cluster.state import ClusterState, NodeState
from canary.errors import ClusterError
from canary.kafka import broker_config

INJECTED = "1000000\nbroker.rack=x:canary-broker"


@pytest.mark.parametrize("config, expect", [
    ({"NOT A KEY": "1"}, "is not a broker config name"),
    ({"message.max.bytes": INJECTED}, "a value must be one line"),
    ({"message.max.bytes": "1\r"}, "a value must be one line"),
    ({"a.custom.note": "x\\", "log.retention.ms": "3600000"}, "'a.custom.note': a value must not end in a backslash"),
    ({"broker.rack": "x"}, "managed by the local cluster"),
])
def test_overrides_the_rule_refuses(config, expect):
    with pytest.raises(ClusterError, match=expect):
        node_config.validate_overrides(config)


def test_a_value_with_a_line_break_never_reaches_server_properties(tmp_path):
    broker = NodeState(node_id=1, role="broker", version="3.9.2", port=9092, config={"message.max.bytes": INJECTED})
    controller = NodeState(node_id=3000, role="controller", version="3.9.2", port=9093)
    state = ClusterState(cluster_id="x", directory=str(tmp_path), format_release="3.9", broker_heap="256m",
                         controller_heap="256m", nodes=[controller, broker])
    with pytest.raises(ClusterError, match="one line"):
        node_config.render(state, broker)


def test_good_overrides_pass_and_render_one_line_each():
    assert broker_config.config_problems({"num.io.threads": "6", "log.cleaner.threads": None}) == []
    assert broker_config.properties_line("num.io.threads", "6") == "num.io.threads=6\n"


@pytest.mark.parametrize("value", ["x\\", "C:\\dir\\", "x\\\\"])
def test_a_value_ending_in_a_backslash_never_reaches_server_properties(value):
    assert broker_config.config_problems({"a.custom.note": value}) == [
        "'a.custom.note': a value must not end in a backslash (a trailing backslash joins the next line of "
        "server.properties to it, so the next override would be lost)"]
    with pytest.raises(ValueError, match="config 'a.custom.note': a value must not end in a backslash"):
        broker_config.properties_line("a.custom.note", value)
    assert broker_config.properties_line("a.custom.note", "x\\y") == "a.custom.note=x\\y\n"
