"""Steady user traffic from Kafka's own tools on real brokers: records flow into the topic while it runs, the
consumer reads them back, and stop() leaves no tool running."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from waiting import wait_until

from canary import process
from canary.cluster import distribution
from canary.cluster.traffic import TrafficSpec, UserTraffic, ensure_topic, parse_consumer, parse_producer

pytestmark = [pytest.mark.integration, pytest.mark.parallel]
# Light (the suite shares two cores), yet enough for the tools' 5 s reports to show records flowing.
SPEC = TrafficSpec("traffic-orders", records_per_s=300, record_size=500, partitions=6, replication_factor=3)


NOT_YET = {KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE, KafkaError.UNKNOWN_TOPIC_OR_PART}


def _end_offsets(bootstrap: str, spec: TrafficSpec) -> int:
    """The records in the topic; 0 while a broker answers with a retriable error (a topic made a moment ago: its
    leaders are not yet known everywhere), so a wait asks again."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "traffic-test-offsets"})
    try:
        return sum(consumer.get_watermark_offsets(TopicPartition(spec.topic, p), timeout=10)[1]
                   for p in range(spec.partitions))
    except KafkaException as exc:  # librdkafka does not flag these retriable here, though they are
        if exc.args[0].code() in NOT_YET:
            return 0
        raise
    finally:
        consumer.close()


def _reported(path, parse):
    if not path.exists():
        return None
    with open(path) as lines:
        return parse(lines)


def test_records_flow_while_traffic_runs_and_stop_ends_both_tools(shared_cluster, run_root):
    bootstrap = shared_cluster.bootstrap_servers
    dist = distribution.ensure(shared_cluster.state.brokers[0].version)
    log_dir = run_root / "traffic"  # under the suite's root: its final sweep would find a tool left behind
    traffic = UserTraffic(dist, bootstrap, SPEC, log_dir)
    try:
        traffic.start()
        assert ensure_topic(bootstrap, SPEC) is False  # made by start(); a repeat is harmless
        first = wait_until(lambda: _end_offsets(bootstrap, SPEC), 60, "the first records")
        wait_until(lambda: _end_offsets(bootstrap, SPEC) > first + 1000, 30, "the end offsets to grow")
        # Both tools report every 5 s; the consumer's first report comes once its group has joined.
        wait_until(lambda: _reported(log_dir / "consumer.log", parse_consumer), 45, "the consumer's first report")
        wait_until(lambda: _reported(log_dir / "producer.log", parse_producer), 15, "the producer's first report")
        traffic.check()
    finally:
        summary = traffic.stop()
    assert [(o.tool, o.state) for o in summary.outcomes] == [("producer", "stopped"), ("consumer", "stopped")]
    assert all(process.start_time(pid) is None for pid in traffic.pids)
    assert process.kill_marked(str(log_dir.resolve())) == []  # nothing with the traffic's marker is left
    assert summary.producer is not None and summary.consumer is not None, summary
    produced = _end_offsets(bootstrap, SPEC)
    # What the producer counted as acknowledged is in the log, and what the consumer read came from it.
    assert 0 < summary.producer.acknowledged <= produced and summary.producer.errors == 0
    assert 0 < summary.consumer.consumed <= produced
    assert traffic.stop() is summary
