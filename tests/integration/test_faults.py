"""Fault injection on real brokers: a broker's rack changed at a restart, and a delaying proxy in
front of one broker's client listener seen by the probe."""

from __future__ import annotations

import pytest

from canary.cluster.health import admin_client
from canary.errors import ClusterError
from canary.lanes import broker_lane, canary_rack, real_rack

pytestmark = pytest.mark.integration


def _metadata_racks(bootstrap: str) -> dict[int, str | None]:
    # What every client sees: the rack in cluster metadata (the canary marker travels there).
    admin = admin_client(bootstrap)  # kept referenced until the future resolves
    cluster = admin.describe_cluster(request_timeout=10).result(timeout=15)
    return {node.id: node.rack for node in cluster.nodes}


def test_bad_fault_requests_change_nothing(shared_cluster):
    before = {n.node_id: (n.pid, n.rack) for n in shared_cluster.status().nodes}
    with pytest.raises(ClusterError, match="controller.*rack"):
        shared_cluster.restart_node(3000, rack="a")
    with pytest.raises(ClusterError, match="not a rack name"):
        shared_cluster.restart_node(1, rack=" ")
    assert {n.node_id: (n.pid, n.rack) for n in shared_cluster.status().nodes} == before


def test_restart_marks_a_broker_canary_by_rack_and_unmarks_it(cluster_factory):
    cluster = cluster_factory(brokers=1, racks=["a"])
    cluster.restart_node(1, rack=canary_rack("a"))
    assert {n.node_id: n.rack for n in cluster.status().nodes if n.role == "broker"} == {1: "a:canary-broker"}
    racks = _metadata_racks(cluster.bootstrap_servers)
    assert broker_lane(racks[1]) == "canary"
    cluster.restart_node(1, version=None, rack=real_rack(racks[1]))
    assert _metadata_racks(cluster.bootstrap_servers) == {1: "a"}
    cluster.restart_node(1)  # rack left out: unchanged
    assert cluster.state.node(1).rack == "a"
    cluster.restart_node(1, rack=None)
    assert _metadata_racks(cluster.bootstrap_servers) == {1: None}
