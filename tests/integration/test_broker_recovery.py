"""A broker recovering its logs after an unclean stop, read as the warm-up reads it (canary.rollout.broker.recovery):
KIP-831's gauges through the JMX exporter, what it still has to recover going down while it is not registered, each
step down progress. Real brokers; make faults (~40 s)."""

from __future__ import annotations

import threading
import time

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from conftest import running_cluster

from canary.broker_metrics.sources import ExporterSource
from canary.kafka.clients import QUIET_LOGGER
from canary.rollout.broker import recovery
from canary.rollout.broker.recovery import Recovery

PARTITIONS = 40


@pytest.mark.slow
def test_a_broker_recovering_its_logs_shows_what_it_has_left_and_it_goes_down(monkeypatch):
    monkeypatch.setattr(recovery, "CHECK_EVERY", 0.0)
    with running_cluster("recovery", brokers=1) as cluster:
        bootstrap = cluster.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bootstrap, "logger": QUIET_LOGGER})
        # Small segments, never flushed by Kafka: an unclean stop leaves every partition's last ones to recover.
        admin.create_topics([NewTopic("fill", PARTITIONS, 1, config={"segment.bytes": "102400"})])["fill"].result()
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "logger": QUIET_LOGGER})
        for i in range(60_000):
            while True:
                try:
                    producer.produce("fill", b"x" * 1000, partition=i % PARTITIONS)
                    break
                except BufferError:
                    producer.poll(0.1)
        assert producer.flush(60) == 0
        (broker,) = cluster.metrics_endpoints()
        source = ExporterSource(cluster.metrics_endpoints())
        cluster.stop_node(broker, kill=True)
        starting = threading.Thread(target=cluster.start_node, args=(broker,), daemon=True)
        starting.start()
        seen: list[str] = []
        r = Recovery(source, [broker])
        while starting.is_alive():  # the broker is not registered before it recovered its logs
            text = r.describe(f"broker {broker} not registered yet")
            if text is not None and r.moved(text) and "recovering" in text:
                seen.append(text)
            time.sleep(0.05)
        starting.join()
    assert len(seen) >= 2, seen  # read while it recovered, and it moved
    left = [int(t.split("recovering its logs: ")[1].split(" log(s)")[0]) for t in seen]
    assert left[0] > left[-1] and left[0] <= PARTITIONS, left
