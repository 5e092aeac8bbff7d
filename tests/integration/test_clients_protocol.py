"""Lane consumers with the KIP-848 group protocol (`group.protocol=consumer`) on Kafka 4.1.2 brokers with
group.version >= 1: isolation holds and a second canary instance resumes from the first one's commits.

The lane consumers assign their partitions themselves (no client-side assignor exists under KIP-848), so the
protocol changes nothing in what they read; this test shows librdkafka and the brokers accept that use."""

from __future__ import annotations

import json
import uuid

import pytest
from lane_clients import BASELINE_PARTITIONS, CANARY_PARTITIONS, Reading, Sent, create_topic, produce, wait_for_lanes
from prometheus_client import CollectorRegistry
from waiting import wait_until

from canary.clients import ClientMetrics, LaneConsumer, LaneProducer
from canary.kafka.clients import QUIET_LOGGER
from canary.lanes import canary_rack

pytestmark = [pytest.mark.integration, pytest.mark.parallel]

TARGET_VERSION = "4.1.2"


def test_lane_consumers_with_group_protocol_consumer_stay_in_their_lane_and_resume_from_commits(cluster_factory):
    # broker 3 is the canary broker from the start (racks go round robin over the brokers)
    cluster = cluster_factory(brokers=3, version=TARGET_VERSION, racks=["a", "b", canary_rack(None)])
    formatted_with = cluster.features().finalized.get("group.version", 0)
    if formatted_with < 1:
        cluster.finalize(levels={"group.version": 1})
    assert cluster.features().finalized["group.version"] >= 1
    bootstrap, topic, n = cluster.bootstrap_servers, "clients-kip848", 400
    create_topic(bootstrap, topic)
    wait_for_lanes(bootstrap, topic, canary=CANARY_PARTITIONS)
    metrics = ClientMetrics(CollectorRegistry())
    group = f"svc-{uuid.uuid4().hex[:6]}"

    def consumer(instance_id: str) -> LaneConsumer:
        return LaneConsumer({"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
                             "group.instance.id": instance_id, "auto.offset.reset": "earliest",
                             "logger": QUIET_LOGGER}, topic, metrics=metrics, refresh_interval=1)

    sent = {lane: Sent(lane) for lane in ("canary", "baseline")}
    for lane, client_id in (("canary", "svc-canary-p"), ("baseline", "svc-p")):
        producer = LaneProducer({"bootstrap.servers": bootstrap, "client.id": client_id, "logger": QUIET_LOGGER},
                                topics=[topic], metrics=metrics)
        try:
            produce(producer, sent[lane], topic, 0, n)
            assert producer.flush(60) == 0
        finally:
            producer.close()
    assert len(sent["canary"].acked) == n and len(sent["baseline"].acked) == n
    assert sent["canary"].partitions() == set(CANARY_PARTITIONS)

    baseline_reader = Reading(consumer("svc-0"))
    baseline_reader.start()
    first = consumer("svc-canary-0")
    seen_first: set = set()
    try:
        assert first.assignment == {(topic, p) for p in CANARY_PARTITIONS}
        handled = first.process(lambda msg: seen_first.add(tuple(json.loads(msg.value()).values())),
                                max_messages=n // 2, duration=120)
    finally:
        first.close()  # commits what it processed
    assert handled == n // 2
    second = Reading(consumer("svc-canary-1"))
    # The first instance's commits; a partition it read nothing from has none (OFFSET_INVALID) and starts at
    # auto.offset.reset (seen in CI: all 200 records came from partition 2).
    assert sum(o for o in second.consumer.start_offsets.values() if o >= 0) == n // 2
    second.start()
    try:
        wait_until(lambda: len(second.of("canary")) >= n - n // 2 and baseline_reader.of("baseline") >= set(
            sent["baseline"].acked), what="both lanes consumed")
    finally:
        canary_received, baseline_received = second.finish(), baseline_reader.finish()

    assert baseline_reader.consumer.assignment == {(topic, p) for p in BASELINE_PARTITIONS}
    leaked = sum(c for (producer, _), c in baseline_received.items() if producer == "canary")
    crossed = sum(c for (producer, _), c in canary_received.items() if producer == "baseline")
    print(f"\nKIP-848 protocol (group.version {formatted_with} after formatting): baseline consumer received "
          f"{leaked} of {n} canary records; canary instances "
          f"{len(seen_first)} + {len(canary_received)} of {n} (second resumed at the first's commits), "
          f"{crossed} baseline records")
    assert leaked == 0 and crossed == 0
    assert seen_first | set(canary_received) == set(sent["canary"].acked)
    assert not seen_first & set(canary_received)  # a clean hand-over between the instances: no record twice
    assert set(baseline_received) == set(sent["baseline"].acked)
