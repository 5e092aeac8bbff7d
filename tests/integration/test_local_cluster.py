"""The embedded local cluster against real Kafka brokers (separate JVMs on loopback)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from waiting import wait_until

from canary import process
from canary.cluster.distribution import BASELINE_VERSION, TARGET_VERSION
from canary.cluster.local import LocalCluster
from canary.errors import ClusterStateError, PortInUseError, SetupError, UnknownNodeError
from canary.roundtrip import ensure_topic, round_trip

pytestmark = [pytest.mark.integration, pytest.mark.parallel]
KAFKA_CANARY = str(Path(sys.executable).parent / "kafka-canary")


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([KAFKA_CANARY, *args], capture_output=True, text=True, timeout=300)


def _produce(bootstrap: str, topic: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    failures = []
    for i in range(count):
        producer.produce(topic, value=f"m{i}".encode(), partition=i % 3,
                         on_delivery=lambda err, _msg: err and failures.append(err))
    assert producer.flush(60) == 0 and not failures


def _consume_all(bootstrap: str, topic: str, partitions: int) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"t-{time.time_ns()}",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    values = []
    try:
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions)}
        deadline = time.monotonic() + 60
        while len(values) < sum(ends.values()) and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                values.append(msg.value())
    finally:
        consumer.close()
    return values


def test_three_brokers_serve_an_acks_all_round_trip_on_rf3(shared_cluster):
    ensure_topic(shared_cluster.bootstrap_servers, "rt", [b.node_id for b in shared_cluster.state.brokers])
    results = round_trip(shared_cluster.bootstrap_servers, "rt")
    assert [r.partition for r in results] == [0, 1, 2]
    assert all(r.ok for r in results), results
    assert sorted(r.leader for r in results) == [1, 2, 3]  # through every leader
    assert all(len(r.replicas) == 3 and sorted(r.isr) == [1, 2, 3] for r in results)


def test_status_json_from_a_second_process(shared_cluster):
    done = _cli("cluster", "status", "--json", "--dir", str(shared_cluster.directory))
    assert done.returncode == 0, done.stderr
    status = json.loads(done.stdout)
    assert status["bootstrap_servers"] == shared_cluster.bootstrap_servers
    assert status["healthy"] is True
    nodes = {n["id"]: n for n in status["nodes"]}
    assert sorted(nodes) == [1, 2, 3, 3000]
    assert nodes[3000]["role"] == "controller" and nodes[1]["role"] == "broker"
    for node in nodes.values():
        assert node["version"] == BASELINE_VERSION and node["state"] == "online"
        assert process.start_time(node["pid"]) is not None
        assert set(node) >= {"id", "role", "version", "rack", "pid", "state"}


def test_hard_killed_broker_is_down_with_under_replicated_partitions_and_restart_heals(shared_cluster):
    ensure_topic(shared_cluster.bootstrap_servers, "rt", [b.node_id for b in shared_cluster.state.brokers])
    victim = shared_cluster.state.node(3)
    os.kill(victim.pid, signal.SIGKILL)  # a crash, not an operation of ours
    status = wait_until(lambda: (s := shared_cluster.status()).health.under_replicated and s, 60,
                         "under-replicated partitions")
    assert {n.node_id: n.state for n in status.nodes}[3] == "down"
    assert any(p.startswith("rt-") for p in status.health.under_replicated)
    assert 3 in status.health.missing_brokers
    assert not status.health.healthy

    shared_cluster.start_node(3)  # waits for health: registered and back in every ISR
    status = shared_cluster.status()
    assert status.health.healthy and {n.node_id: n.state for n in status.nodes}[3] == "online"
    assert all(r.ok for r in round_trip(shared_cluster.bootstrap_servers, "rt"))


def test_add_and_remove_a_broker(shared_cluster):
    new_id = shared_cluster.add_broker(rack="extra")
    assert new_id == 4
    status = shared_cluster.status()
    assert 4 in status.health.registered_brokers
    assert {n.node_id: n.rack for n in status.nodes}[4] == "extra"
    shared_cluster.remove_broker(4)
    status = shared_cluster.status()
    assert [n.node_id for n in status.nodes if n.role == "broker"] == [1, 2, 3]
    assert 4 not in status.health.registered_brokers
    assert not (shared_cluster.directory / "nodes" / "4").exists()
    assert shared_cluster.wait_healthy(30).healthy


def test_bad_input_changes_nothing(shared_cluster, run_root):
    before = {n.node_id: n.pid for n in shared_cluster.status().nodes}

    with pytest.raises(SetupError, match="not a released version on Maven Central"):
        LocalCluster.up(run_root / "unknown-version", brokers=1, version="3.9.99")
    assert not (run_root / "unknown-version").exists()

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(PortInUseError, match=f"port {port}"):
            LocalCluster.up(run_root / "port-in-use", brokers=1, base_port=port)
    assert not (run_root / "port-in-use" / "cluster.json").exists()

    with pytest.raises(ClusterStateError, match="already running"):
        LocalCluster.up(shared_cluster.directory, brokers=3)

    with pytest.raises(UnknownNodeError, match="no broker with id 9"):
        shared_cluster.restart_node(9, role="broker")
    done = _cli("cluster", "restart-broker", "9", "--dir", str(shared_cluster.directory))
    assert done.returncode == 2 and "no broker with id 9" in done.stderr
    done = _cli("cluster", "restart-broker", "1", "--version", "9.9.9", "--dir", str(shared_cluster.directory))
    assert done.returncode == 2 and "9.9.9 is not a released version" in done.stderr

    status = shared_cluster.status()
    assert {n.node_id: n.pid for n in status.nodes} == before
    assert all(n.version == BASELINE_VERSION for n in status.nodes) and status.health.healthy


@pytest.mark.slow  # ~1 min: make faults (CI's time)
def test_upgrade_in_place_rollback_before_finalize_then_finalize(cluster_factory):
    cluster = cluster_factory(brokers=3)
    bootstrap = cluster.bootstrap_servers
    ensure_topic(bootstrap, "data", [1, 2, 3])
    _produce(bootstrap, "data", 300)
    segment_dir = cluster.directory / "nodes" / "2" / "data"
    before_files = {p.name for p in segment_dir.glob("data-*")}
    assert len(before_files) == 3
    levels_before = cluster.features()

    # One broker on the target version: a mixed-version cluster that keeps serving.
    cluster.restart_node(2, version=TARGET_VERSION)
    status = cluster.status()
    assert {n.node_id: n.version for n in status.nodes} == {3000: BASELINE_VERSION, 1: BASELINE_VERSION,
                                                             2: TARGET_VERSION, 3: BASELINE_VERSION}
    assert status.health.healthy
    assert all(r.ok for r in round_trip(bootstrap, "data"))
    assert {p.name for p in segment_dir.glob("data-*")} == before_files  # same log dirs
    assert sorted(_consume_all(bootstrap, "data", 3)).count(b"m299") == 1

    # Not finalized yet, so the broker can go back to the baseline.
    cluster.restart_node(2, version=BASELINE_VERSION)
    assert {n.version for n in cluster.status().nodes} == {BASELINE_VERSION}
    assert cluster.features().finalized == levels_before.finalized

    # Every node on the target (controllers last would be the rollout's order; any order works here).
    for node_id in (1, 2, 3, 3000):
        cluster.restart_node(node_id, version=TARGET_VERSION)
    assert cluster.features().finalized["metadata.version"] == levels_before.finalized["metadata.version"]
    changes = cluster.finalize()
    after = cluster.features()
    assert changes["metadata.version"][1] == after.finalized["metadata.version"]
    assert after.finalized["metadata.version"] > levels_before.finalized["metadata.version"]
    # Only the levels asked for: kraft.version is not raised by a release finalize.
    assert after.finalized.get("kraft.version", 0) == levels_before.finalized.get("kraft.version", 0)
    assert cluster.finalize() == {}  # a harmless repeat
    values = _consume_all(bootstrap, "data", 3)
    assert len(values) >= 300 and len(set(values) & {f"m{i}".encode() for i in range(300)}) == 300


def test_jvms_die_with_a_killed_parent_and_down_leaves_none(run_root):
    directory = run_root / "orphan-check"
    script = ("import sys, time; from pathlib import Path; from canary.cluster.local import LocalCluster; "
              f"LocalCluster.up(Path({str(directory)!r}), brokers=1, tie_to_parent=True); "
              "print('up', flush=True); time.sleep(300)")
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout.readline().strip() == "up"
        pids = [n.pid for n in LocalCluster.open(directory).state.nodes]
        assert all(process.start_time(pid) for pid in pids)
        parent.kill()  # the test process of a failed run, killed hard
        parent.wait(30)
        wait_until(lambda: all(process.start_time(pid) is None for pid in pids), 30, "JVMs gone with their parent")
    finally:
        parent.kill()
        process.kill_marked(str(directory))

    cluster = LocalCluster.up(directory.with_name("down-check"), brokers=1, tie_to_parent=True)
    cluster.down()
    assert process.kill_marked(str(cluster.directory)) == []  # down left no JVM to sweep
    assert not (cluster.directory / "cluster.json").exists()


def test_three_controller_quorum_with_mixed_broker_versions_and_racks(cluster_factory):
    cluster = cluster_factory(brokers=2, controllers=3, broker_versions={2: TARGET_VERSION}, racks=["a", "b"])
    status = cluster.status()
    controllers = [n for n in status.nodes if n.role == "controller"]
    assert len(controllers) == 3 and all(n.state == "online" for n in controllers)
    assert {n.node_id: (n.version, n.rack) for n in status.nodes if n.role == "broker"} == \
        {1: (BASELINE_VERSION, "a"), 2: (TARGET_VERSION, "b")}
    assert status.health.healthy and status.health.lagging_voters == []

    cluster.restart_node(3001, role="controller")  # waits until it has caught up with the quorum again
    assert cluster.health().healthy
    cluster.stop_node(3002, kill=True)
    assert wait_until(lambda: 3002 in cluster.health().lagging_voters, 60, "stopped voter reported as lagging")
