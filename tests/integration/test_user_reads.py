"""Catch-up reads of the user topics on real brokers: each broker's fetch path measured without any load, and a
broker whose fetch path lost its capacity read back slower than the others in the same rounds."""

from __future__ import annotations

import statistics

import pytest
from confluent_kafka import Producer
from waiting import wait_until

from canary.kafka.admin import TopicAdmin
from canary.observations import BrokerReading
from canary.probe.topic import TopicSpec, reconcile
from canary.probe.user_reads import UserReads, UserReadsConfig

pytestmark = pytest.mark.integration

MB = 1024 * 1024


def _fill(bootstrap: str, topic: str, partitions: int, records: int) -> None:
    # Batches of at most 16 kB, the Java client's default: a broker's fetch.max.bytes caps a response at one batch.
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "batch.size": 16384})
    value = b"x" * 1000
    for i in range(records):
        producer.produce(topic, value=value, partition=i % partitions)
        if i % 10_000 == 0:
            producer.flush(30)
    assert producer.flush(60) == 0


def _rounds(reads: UserReads, count: int) -> list[BrokerReading]:
    readings: list[BrokerReading] = []
    for _ in range(count):
        readings += reads.read_once()
    return readings


def test_each_leader_is_read_back_and_a_fetch_path_that_lost_its_capacity_reads_slower(cluster_factory):
    cluster = cluster_factory(brokers=3)
    admin = TopicAdmin(cluster.bootstrap_servers)
    # Six partitions, two led by each broker; the tool's own topics are never read.
    admin.create_topic("orders", [[1, 2, 3], [2, 3, 1], [3, 1, 2], [1, 3, 2], [2, 1, 3], [3, 2, 1]], {})
    reconcile(admin, TopicSpec("__kafka_canary_orders"))
    wait_until(lambda: all(s.leader > 0 for s in admin.observe("orders").partitions.values()), 30, "orders led")
    _fill(cluster.bootstrap_servers, "orders", 6, 24_000)  # 4 MB per partition
    emitted: list[BrokerReading] = []
    reads = UserReads(UserReadsConfig(cluster.bootstrap_servers, max_bytes=2 * MB, partitions=2, interval=5.0,
                                      run_id="reads"), emit=emitted.append)
    try:
        healthy = _rounds(reads, 3)
        assert {r.broker for r in healthy} == {1, 2, 3} and len(healthy) == 3 * 2 * 3
        assert all(r.metric == "catch_up_bytes_per_s" and r.source == "user-reads" for r in healthy)
        assert emitted == healthy
        # Each read is bounded: about 2 MB per partition per round, however much the partition holds.
        assert 6 * 3 * 1.5 <= reads.read_bytes / 1e6 <= 6 * 3 * 2.2

        # Two changes nobody meant as a capacity cut: broker 2 sends through 2 KiB socket buffers, broker 3 caps its
        # fetch responses. Consumers at the head of the log would not notice; one reading 2 MB back does.
        cluster.restart_node(2, config={"socket.send.buffer.bytes": "2048", "socket.receive.buffer.bytes": "2048"})
        cluster.restart_node(3, config={"fetch.max.bytes": "1024"})
        wait_until(lambda: _led_by(admin, 2) and _led_by(admin, 3), 90, "brokers 2 and 3 leading their partitions")
        changed = _rounds(reads, 4)
    finally:
        reads.stop()
    rates = {b: statistics.median(r.value for r in changed if r.broker == b) for b in (1, 2, 3)}
    # Measured here: about 450 MB/s from broker 1, 1.4 MB/s through the tiny buffers, 18 MB/s capped.
    assert rates[2] < 0.2 * rates[1] and rates[3] < 0.5 * rates[1], rates


def _led_by(admin: TopicAdmin, broker: int) -> bool:
    """Elects the preferred leaders of `orders`; true once `broker` leads its two partitions again."""
    state = admin.observe("orders")
    mine = [p for p, s in state.partitions.items() if s.replicas[0] == broker]
    if all(state.partitions[p].leader == broker for p in mine):
        return True
    if all(broker in state.partitions[p].isr for p in mine):
        admin.elect("orders", mine)
    return False
