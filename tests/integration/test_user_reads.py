"""Catch-up reads on real brokers: of the user topics, each broker's fetch path measured without any load, and a
broker whose fetch path lost its capacity read back slower than the others in the same rounds; of the load's own
topic (an idle cluster's only data), the same broker seen as slow."""

from __future__ import annotations

import statistics
import time

import pytest
from confluent_kafka import KafkaException, Producer, TopicPartition
from waiting import wait_until

from canary.kafka.admin import TopicAdmin
from canary.observations import BrokerReading
from canary.probe.catch_up import MIN_RECORDS, Backlog, behind_consumer, read_behind
from canary.probe.load import Load, LoadConfig
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


def test_the_loads_reads_from_behind_see_a_fetch_path_that_lost_its_capacity(cluster_factory):
    """Broker 2 sends through 2 KiB socket buffers. The load's producer and its consumer at the head of the log keep
    up with it; reading each partition's latest megabyte back shows it. (When a read fitted one fetch response it
    timed the client's loop instead: every broker read back at about 1.5 GB/s, tiny buffers or not, and the gate
    promoted the change on an idle cluster.)"""
    cluster = cluster_factory(brokers=3)
    cluster.restart_node(2, config={"socket.send.buffer.bytes": "2048", "socket.receive.buffer.bytes": "2048"})
    readings: list[BrokerReading] = []
    load = Load(LoadConfig(cluster.bootstrap_servers, 400, 1000, interval=2.0, run_id="load-catch-up"),
                emit=readings.append)
    load.start()
    try:
        wait_until(lambda: all(len(_catch_up(readings, b)) >= 4 for b in (1, 2, 3)), 120,
                   "four catch-up readings through every broker")
    finally:
        summary = load.stop()
    assert summary["lanes"]["baseline"]["failed"] == 0
    rates = {b: statistics.median(_catch_up(readings, b)) for b in (1, 2, 3)}
    assert rates[2] < 0.2 * min(rates[1], rates[3]), rates
    print(f"\nthe load read back from behind, median bytes/s per leader: {rates}")


def _catch_up(readings: list[BrokerReading], broker: int) -> list[float]:
    return [r.value for r in readings if r.broker == broker and r.metric == "load_catch_up_bytes_per_s"]


def test_a_partition_that_ends_in_a_transaction_marker_is_read_to_its_end_not_to_the_give_up(shared_cluster):
    # A transactional service's partition: its last offset holds the commit marker, no record ever arrives there.
    topic = f"txn-ends-{time.time_ns()}"
    admin = TopicAdmin(shared_cluster.bootstrap_servers)
    admin.create_topic(topic, [[1]], {})
    wait_until(lambda: getattr(admin.observe(topic).partitions.get(0), "leader", -1) > 0, 30, "led")
    producer = Producer({"bootstrap.servers": shared_cluster.bootstrap_servers, "transactional.id": topic})
    producer.init_transactions(30)
    producer.begin_transaction()
    for _ in range(MIN_RECORDS * 4):
        producer.produce(topic, value=b"x" * 1000, partition=0)
    producer.commit_transaction(30)
    consumer = behind_consumer({"bootstrap.servers": shared_cluster.bootstrap_servers}, MB, "txn-reads")
    give_up = 120.0
    try:
        # The marker is written after the commit returns; read_behind skips a partition whose end it cannot read in
        # 2 s (a fresh consumer on a busy machine): wait until its end is readable and holds the marker.
        def marker_written() -> bool:
            try:
                return consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=5, cached=False)[1] == \
                    MIN_RECORDS * 4 + 1
            except KafkaException:
                return False
        wait_until(marker_written, 60, "the commit marker written")
        started = time.monotonic()
        caught = read_behind(consumer, [Backlog(topic, 0, MIN_RECORDS * 4 + 1)], give_up)
        took = time.monotonic() - started
    finally:
        consumer.close()
    assert caught[(topic, 0)].records == MIN_RECORDS * 4  # every record, the marker's offset holding none
    # It ended at the partition's end: without, it waited for the marker's offset until it gave up (took == give_up).
    assert took / give_up < 0.25 and caught[(topic, 0)].seconds < took
