"""The probe on real brokers: healthy runs, shared topics, crafted records, a broker going down, lanes."""

from __future__ import annotations

import itertools
import json
import time
import urllib.request
from collections import Counter

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from waiting import wait_until

from canary.kafka.clients import QUIET_LOGGER
from canary.observations import OBSERVATIONS_TOPIC, Observation
from canary.probe.config import ProbeConfig
from canary.probe.message import ProbeMessage
from canary.probe.runner import Probe

pytestmark = pytest.mark.integration


def _get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def _observations(path) -> list[Observation]:
    return [Observation.from_json(line) for line in path.read_text().splitlines()]


def _metric(text: str, name: str, **labels) -> float:
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name + "{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
            total += float(line.rsplit(" ", 1)[1])
    return total


def test_healthy_run_two_probes_share_a_topic_and_crafted_records_are_counted(shared_cluster, tmp_path):
    bootstrap = shared_cluster.bootstrap_servers
    topic = "probe-healthy"
    a = Probe(ProbeConfig(bootstrap, topic=topic, rate=10, http_port=0, producer_id="probe-a", run_id="run-a",
                          observations_file=str(tmp_path / "a.jsonl"), connection_interval=2))
    a.start()
    try:
        port = a.http.port
        assert _get(port, "/liveness")[0] == 200
        wait_until(a.ready, what="probe a ready")
        assert _get(port, "/readiness")[0] == 200
        # a second instance joins late on the same topic
        b = Probe(ProbeConfig(bootstrap, topic=topic, rate=10, producer_id="probe-b", run_id="run-b",
                              observations_file=str(tmp_path / "b.jsonl")))
        b.start()
        try:
            wait_until(b.ready, what="probe b ready")
            wait_until(lambda: a.tracker.foreign_records and b.tracker.foreign_records, what="each seeing the other")
            # crafted records on partition 0: two extra copies of a's first message, junk, a stranger's message
            first = ProbeMessage("probe-a", a.epoch, "run-a", 0, 0, int(time.time() * 1000), 1, "baseline")
            stranger = ProbeMessage("someone-else", "x", "r", 0, 0, int(time.time() * 1000), 1, "baseline")
            crafted = Producer({"bootstrap.servers": bootstrap, "logger": QUIET_LOGGER})
            for value in (first.encode(), first.encode(), b"{not json", b"", stranger.encode()):
                crafted.produce(topic, value=value, partition=0)
            assert crafted.flush(30) == 0
            wait_until(lambda: a.tracker.malformed_records >= 2, what="junk seen")
            wait_until(lambda: _get(port, "/status")[1] and a.connection_checks, what="connection checks")
            status = json.loads(_get(port, "/status")[1])
            metrics = _get(port, "/metrics")[1]
        finally:
            summary_b = b.stop()
    finally:
        summary_a = a.stop()

    for name in ("kafka_canary_records_produced_total", "kafka_canary_records_consumed_total",
                 "kafka_canary_records_produced_latency_seconds_bucket",
                 "kafka_canary_records_consumed_latency_seconds_bucket",
                 "kafka_canary_lane_availability", "kafka_canary_connection_success",
                 "kafka_canary_consumer_error_total", "kafka_canary_records_duplicated_total"):
        assert name in metrics, name
    assert "kafka_canary_records_produced_failed_total" in metrics and "kafka_canary_records_lost" in metrics
    assert _metric(metrics, "kafka_canary_records_duplicated_total", partition="0") == 2
    assert _metric(metrics, "kafka_canary_connection_success") == 3
    assert status["ready"] and status["lanes"]["baseline"]["lost"] == 0

    for summary in (summary_a, summary_b):
        lane = summary.lanes["baseline"]
        assert set(summary.lanes) == {"baseline"}
        assert lane["acked"] > 0 and lane["lost"] == 0 and lane["produce_errors"] == 0
        assert lane["delivered"] == lane["acked"] and lane["out_of_order"] == 0
        assert sum(summary.unresolved.values()) == 0
        assert 0 < lane["produce_latency"]["p50_ms"] < 30_000 and 0 < lane["e2e_latency"]["p50_ms"] < 30_000
        assert sorted(summary.partitions) == [0, 1, 2]
    assert summary_a.lanes["baseline"]["duplicated"] == 2 and summary_b.lanes["baseline"]["duplicated"] == 0
    assert summary_a.malformed_records == 2 and summary_b.malformed_records == 2
    assert summary_a.foreign_records >= 1 + summary_b.lanes["baseline"]["acked"] // 3  # b's on p0 + the stranger

    observed = _observations(tmp_path / "a.jsonl")
    outcomes = Counter(o.outcome for o in observed)
    assert outcomes == {"delivered": summary_a.lanes["baseline"]["delivered"], "duplicate": 2}
    assert {o.run_id for o in observed} == {"run-a"} and {o.producer_id for o in observed} == {"probe-a"}
    assert all(o.lane == "baseline" and o.ack_ts is not None and o.receive_ts is not None for o in observed)
    assert summary_a.observations["written"] == len(observed) and summary_a.observations["failed"] == 0
    # each partition at its own phase of the round (10/s on 3 partitions: a send every 33 ms), not in bursts
    sends = sorted(o.send_ts for o in observed if o.outcome == "delivered")
    gaps = sorted(b - a for a, b in itertools.pairwise(sends))
    assert 20 < gaps[len(gaps) // 2] < 50, gaps[len(gaps) // 2]

    # the same observations are on the cluster, readable by run id
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "probe-test-reader", "logger": QUIET_LOGGER,
                         "enable.auto.commit": False})
    meta = consumer.list_topics(OBSERVATIONS_TOPIC, timeout=10).topics[OBSERVATIONS_TOPIC]
    consumer.assign([TopicPartition(OBSERVATIONS_TOPIC, p, 0) for p in meta.partitions])
    on_cluster = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(on_cluster) < len(observed):
        for msg in consumer.consume(500, timeout=1.0):
            if not msg.error() and msg.key() == b"run-a":
                on_cluster.append(Observation.from_json(msg.value()))
    consumer.close()
    assert sorted(o.message_id for o in on_cluster) == sorted(o.message_id for o in observed)


def test_broker_down_shows_errors_and_recovers_and_canary_lane(cluster_factory, tmp_path):
    cluster = cluster_factory(brokers=3, racks=["canary-broker", "a", "b"])
    path = tmp_path / "obs.jsonl"
    probe = Probe(ProbeConfig(cluster.bootstrap_servers, rate=10, http_port=0, observations_file=str(path),
                              message_timeout=4, metadata_interval=1, reconcile_interval=3, status_window=10,
                              connection_interval=3))
    probe.start()
    try:
        port = probe.http.port
        wait_until(probe.ready, what="ready")
        assert probe.reconciled.produce_partitions == {0: 1, 1: 2, 2: 3}
        cluster.stop_node(2, kill=True)
        wait_until(lambda: (part := probe.ledger.by_partition().get(1)) and part.counts["produce_errors"],
                   what="produce errors on broker 2's partition")
        metrics = wait_until(lambda: (m := _get(port, "/metrics")[1]) and
                        _metric(m, "kafka_canary_availability", partition="1") < 1 and m, what="availability drop")
        failed = "kafka_canary_records_produced_failed_total"
        errors = [line for line in metrics.splitlines() if line.startswith(failed + "{")]
        assert _metric(metrics, failed, partition="1") > 0, errors
        # No comparison with partitions 0 and 2: with RF 3 on 3 brokers, broker 2 follows every partition, so
        # acks=all produce to all of them stalls until it is fenced and leaves their ISR (seen: 45 vs 48 errors).
        wait_until(lambda: not probe.connection_checks[2].ok, what="failed connection check")
        wait_until(lambda: _metric(_get(port, "/metrics")[1], "kafka_canary_connection_success", broker="2") == 0,
              what="connection check metric")
        cluster.start_node(2)
        acked_before = probe.ledger.by_partition()[1].counts["acked"]
        # the probe's own reconcile puts broker 2 back as leader of partition 1 (preferred leader election)
        try:
            wait_until(lambda: probe.view.leaders.get(1) == 2, what="preferred leader back")
        except AssertionError as exc:  # say what the probe saw
            raise AssertionError(f"{exc}: leaders {probe.view.leaders}, topic "
                                 f"{probe.admin.observe(probe.spec.name)}, status {probe.status()}") from exc
        wait_until(lambda: probe.ledger.by_partition()[1].counts["acked"] > acked_before + 20, what="recovery")
    finally:
        summary = probe.stop()

    observed = _observations(path)
    by_outcome = Counter((o.partition, o.outcome) for o in observed)
    assert by_outcome[(1, "produce_error")] > 0
    assert not any(o.outcome == "lost" for o in observed)  # acknowledged messages are never lost
    assert sum(t["lost"] for t in summary.lanes.values()) == 0
    # lanes: broker 1 carries the canary marker, so partition 0 (led by 1) is canary
    lanes = {(o.partition, o.leader): o.lane for o in observed if o.leader is not None and o.leader > 0}
    assert all(lane == ("canary" if leader == 1 else "baseline") for (_, leader), lane in lanes.items())
    assert {o.lane for o in observed if o.partition == 0 and o.leader == 1} == {"canary"}
    assert {o.lane for o in observed if o.partition == 2} == {"baseline"}
    assert summary.lanes["canary"]["delivered"] > 0 and summary.lanes["baseline"]["delivered"] > 0
    assert any(o.outcome == "delivered" and o.partition == 1 and o.leader == 2 and o.send_ts > 0 for o in observed)


def test_a_probe_of_some_leaders_sends_only_to_their_partitions(shared_cluster, tmp_path):
    """A broker rollout's window with a control broker probes the canary's and the control's partitions alone."""
    path = tmp_path / "leaders.jsonl"
    summary = Probe(ProbeConfig(shared_cluster.bootstrap_servers, topic="probe-leaders", rate=20, duration=4,
                                leaders=(2,), observations_file=str(path), run_id="run-leaders")).run()
    observed = [o for o in _observations(path) if o.outcome == "delivered"]
    assert observed and {o.leader for o in observed} == {2}
    assert sum(t["acked"] for t in summary.lanes.values()) == len(observed)
