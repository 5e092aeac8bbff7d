"""Fault injection on real brokers: a broker's rack changed at a restart, and a delaying proxy in
front of one broker's client listener seen by the probe."""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest
from waiting import wait_until

from canary import process
from canary.errors import ClusterError
from canary.kafka.admin import TopicAdmin
from canary.kafka.clients import admin_client
from canary.lanes import broker_lane, canary_rack, real_rack
from canary.observations import Observation
from canary.probe.config import ProbeConfig
from canary.probe.runner import Probe

pytestmark = pytest.mark.integration
KAFKA_CANARY = str(Path(sys.executable).parent / "kafka-canary")


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([KAFKA_CANARY, *args], capture_output=True, text=True, timeout=300)


def _metadata_racks(bootstrap: str) -> dict[int, str | None]:
    # What every client sees: the rack in cluster metadata (the canary marker travels there).
    admin = admin_client(bootstrap)  # kept referenced until the future resolves
    cluster = admin.describe_cluster(request_timeout=10).result(timeout=15)
    return {node.id: node.rack for node in cluster.nodes}


def _metadata_ports(bootstrap: str) -> dict[int, int]:
    admin = admin_client(bootstrap)
    cluster = admin.describe_cluster(request_timeout=10).result(timeout=15)
    return {node.id: node.port for node in cluster.nodes}


def test_bad_fault_requests_change_nothing(shared_cluster):
    before = {n.node_id: (n.pid, n.rack) for n in shared_cluster.status().nodes}
    with pytest.raises(ClusterError, match="controller.*rack"):
        shared_cluster.restart_node(3000, rack="a")
    with pytest.raises(ClusterError, match="not a rack name"):
        shared_cluster.restart_node(1, rack=" ")
    with pytest.raises(ClusterError, match="not a delay"):
        shared_cluster.restart_node(1, client_delay_ms=-5)
    with pytest.raises(ClusterError, match="not a delay"):
        shared_cluster.restart_node(1, client_delay_ms=float("inf"))
    with pytest.raises(ClusterError, match="controller.*client delay"):
        shared_cluster.restart_node(3000, client_delay_ms=50)
    done = _cli("cluster", "restart-broker", "1", "--client-delay-ms", "-5", "--dir", str(shared_cluster.directory))
    assert done.returncode == 2 and "not a delay" in done.stderr
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


def test_a_delay_proxy_slows_one_brokers_partitions_by_the_delay_and_removing_it_loses_nothing(
        cluster_factory, tmp_path):
    cluster = cluster_factory(brokers=3)
    bootstrap = cluster.bootstrap_servers
    real_ports = {n.node_id: n.port for n in cluster.state.brokers}

    # Broker 2 becomes a slow canary broker: canary marker in its rack, 50 ms on every client request.
    cluster.restart_node(2, rack=canary_rack(None), client_delay_ms=50)
    status = {n.node_id: n for n in cluster.status().nodes}
    proxy_port = status[2].proxy_port
    assert status[2].client_delay_ms == 50 and status[2].proxy == "running" and proxy_port not in real_ports.values()
    assert status[1].client_delay_ms == 0 and status[1].proxy is None
    assert cluster.bootstrap_servers == bootstrap  # clients still bootstrap on the brokers' own ports
    assert _metadata_ports(bootstrap) == {1: real_ports[1], 2: proxy_port, 3: real_ports[3]}
    proxy = cluster.state.node(2)
    shown = _cli("cluster", "status", "--dir", str(cluster.directory))
    assert shown.returncode == 0 and f"50 ms via proxy port {proxy_port} (running)" in shown.stdout
    assert process.is_ours(proxy.proxy_pid, proxy.proxy_pid_start, process.proxy_marker(cluster.directory, 2))

    path = tmp_path / "obs.jsonl"
    probe = Probe(ProbeConfig(bootstrap, rate=20, observations_file=str(path), metadata_interval=1,
                              reconcile_interval=3, observations_topic=""))
    probe.start()
    try:
        wait_until(probe.ready, what="probe ready")
        wait_until(lambda: probe.view.leaders == {0: 1, 1: 2, 2: 3}, what="preferred leaders")
        settled_ms = time.time() * 1000
        wait_until(lambda: (t := probe.ledger.by_partition(settled_ms).get(1)) and t.counts["acked"] >= 200,
                   timeout=120, what="200 acknowledgements from the delayed broker")

        # Delay removed while the probe runs: broker 2 restarts and advertises its own port again.
        removing_ms = time.time() * 1000
        cluster.restart_node(2, client_delay_ms=0)
        after = {n.node_id: n for n in cluster.status().nodes}[2]
        assert after.client_delay_ms == 0 and after.proxy is None and after.proxy_port is None
        assert not process.is_ours(proxy.proxy_pid, proxy.proxy_pid_start, process.proxy_marker(cluster.directory, 2))
        assert _metadata_ports(bootstrap) == real_ports
        assert cluster.wait_healthy(60).healthy
        # The probe's reconcile may hand broker 2 another partition than before (it left and came back); a
        # preferred election from here too, so the check does not hang on the reconcile's timing under load.
        admin = TopicAdmin(bootstrap)

        def broker_2_leads() -> list[int]:
            led = [p for p, b in probe.view.leaders.items() if b == 2]
            if not led:
                admin.elect(probe.config.topic, sorted(probe.view.leaders))
            return led
        led = wait_until(broker_2_leads, timeout=180, what="broker 2 leading again")
        recovered_ms = time.time() * 1000
        wait_until(lambda: (t := probe.ledger.by_partition(recovered_ms).get(led[0])) and t.counts["acked"] >= 20,
                   what="acknowledgements from broker 2 without the proxy")
    finally:
        summary = probe.stop()

    observed = [Observation.from_json(line) for line in path.read_text().splitlines()]
    while_delayed = [o for o in observed if settled_ms <= o.send_ts and o.ack_ts and o.ack_ts < removing_ms]
    delayed = [o.produce_latency_ms for o in while_delayed if o.leader == 2]
    others = [o.produce_latency_ms for o in while_delayed if o.leader in (1, 3)]
    assert len(delayed) >= 100 and len(others) >= 100
    # Every produce through the proxy reaches broker 2 at least the delay late, however busy the machine; how
    # close the increase is to the delay (and that replication is not proxied) is bench/probe_latency_accuracy.py's
    # figure, since the gap between partitions' medians swings by hundreds of ms on a saturated machine.
    # A message sent just as leadership moved can be attributed to broker 2 and still bypass the proxy: most,
    # not all, must show the delay.
    assert sum(ms >= 50 - 1 for ms in delayed) >= 0.9 * len(delayed)  # ms timestamps round
    assert statistics.median(delayed) >= 50
    assert {o.lane for o in while_delayed if o.leader == 2} == {"canary"}
    assert {o.lane for o in while_delayed if o.leader in (1, 3)} == {"baseline"}

    assert sum(t["lost"] for t in summary.lanes.values()) == 0  # acknowledged messages are never lost
    assert not any(o.outcome == "lost" for o in observed)
    assert cluster.health().healthy
