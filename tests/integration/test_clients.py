"""Lane-aware producers and consumers on real brokers (issue 6: isolation, fallback, leadership changes).

One 3-broker cluster for the module; broker 3 becomes the canary broker (its rack carries the marker) when a test
needs canary partitions, and each test first brings the cluster to the state it needs, so any test runs alone.
The consumers here use the classic protocol; test_clients_protocol.py runs them with group.protocol=consumer."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import time
import uuid
from collections import Counter
from collections.abc import Callable

import jvm_lanes
import pytest
from confluent_kafka import Consumer, TopicPartition
from conftest import running_cluster
from lane_clients import (
    BASELINE_PARTITIONS,
    CANARY_PARTITIONS,
    PARTITIONS,
    Reading,
    Sent,
    Steady,
    create_topic,
    produce,
    read_all,
    wait_for_lanes,
)
from prometheus_client import CollectorRegistry
from waiting import wait_until

from canary.clients import ClientMetrics, LaneConsumer, LaneProducer, LaneView
from canary.cluster.local import LocalCluster
from canary.judge.aggregates import Aggregates
from canary.kafka.clients import QUIET_LOGGER
from canary.lanes import canary_rack
from canary.observations import OBSERVATIONS_TOPIC, Observation

pytestmark = [pytest.mark.integration, pytest.mark.parallel]

CANARY_BROKER = 3


@pytest.fixture(scope="module")
def lane_cluster():
    with running_cluster("clients", brokers=3) as cluster:
        yield cluster


def _canary_broker(cluster: LocalCluster, on: bool) -> None:
    rack = canary_rack(None) if on else None
    if cluster.state.node(CANARY_BROKER).rack != rack:
        cluster.restart_node(CANARY_BROKER, rack=rack)


def _value(metrics: ClientMetrics, name: str, **labels) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


def _consumer(bootstrap: str, group: str, ident: dict, metrics: ClientMetrics, **kwargs) -> LaneConsumer:
    return LaneConsumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                         "logger": QUIET_LOGGER, **ident}, kwargs.pop("topic"), metrics=metrics,
                        refresh_interval=1, **kwargs)


def _producer(bootstrap: str, client_id: str, topic: str, metrics: ClientMetrics, **kwargs) -> LaneProducer:
    return LaneProducer({"bootstrap.servers": bootstrap, "client.id": client_id, "logger": QUIET_LOGGER},
                        topics=[topic], metrics=metrics, **kwargs)


def _read_observations(bootstrap: str, run_id: str, expected: int, timeout: float = 90) -> list[Observation]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "verify-observations", "logger": QUIET_LOGGER})
    partitions = consumer.list_topics(OBSERVATIONS_TOPIC, timeout=10).topics[OBSERVATIONS_TOPIC].partitions
    consumer.assign([TopicPartition(OBSERVATIONS_TOPIC, p, 0) for p in partitions])
    found: list[Observation] = []
    deadline = time.monotonic() + timeout
    try:
        while len(found) < expected and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None and msg.key() == run_id.encode():
                found.append(Observation.from_json(msg.value()))
    finally:
        consumer.close()
    return found


def test_without_canary_partitions_the_canary_producer_falls_back_says_so_and_nothing_is_lost(
        lane_cluster, caplog):
    _canary_broker(lane_cluster, on=False)
    bootstrap, topic, n = lane_cluster.bootstrap_servers, "clients-fallback", 600
    create_topic(bootstrap, topic)
    wait_for_lanes(bootstrap, topic, canary=())
    metrics = ClientMetrics(CollectorRegistry())
    group = f"svc-{uuid.uuid4().hex[:6]}"
    canary_reader = Reading(_consumer(bootstrap, group, {"client.id": "svc-canary-c"}, metrics, topic=topic))
    baseline_reader = Reading(_consumer(bootstrap, group, {"client.id": "svc-c"}, metrics, topic=topic))
    for reader in (canary_reader, baseline_reader):
        reader.start()
    canary_sent, baseline_sent = Sent("canary"), Sent("baseline")
    with caplog.at_level(logging.INFO, logger="canary.clients"):
        canary = _producer(bootstrap, "svc-canary-p", topic, metrics=metrics, refresh_interval=1)
        baseline = _producer(bootstrap, "svc-p", topic, metrics=metrics, refresh_interval=1)
        try:
            assert canary.lane_partitions(topic) == (tuple(range(PARTITIONS)), True)
            produce(canary, canary_sent, topic, 0, n)
            produce(baseline, baseline_sent, topic, 0, n)
            assert canary.flush(60) == 0 and baseline.flush(60) == 0
        finally:
            canary.close()
            baseline.close()
        try:
            wanted = set(canary_sent.acked) | set(baseline_sent.acked)
            wait_until(lambda: wanted <= set(baseline_reader.received) | set(canary_reader.received),
                       what="every acknowledged record consumed")
        finally:
            canary_received, baseline_received = canary_reader.finish(), baseline_reader.finish()

    assert not canary_sent.errors and not baseline_sent.errors
    assert len(canary_sent.acked) == n and len(baseline_sent.acked) == n
    # falls back to every partition, and says so in the metric and once in the log
    assert canary_sent.partitions() == set(range(PARTITIONS))
    assert _value(metrics, "kafka_canary_client_lane_fallback", client="svc-canary-p", topic=topic, lane="canary") == 1
    assert _value(metrics, "kafka_canary_client_lane_fallback_records_total", client="svc-canary-p", topic=topic,
                  lane="canary") == n
    assert _value(metrics, "kafka_canary_client_lane_fallback", client="svc-p", topic=topic, lane="baseline") == 0
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING
            and "fallback" in r.getMessage()] == [f"producer svc-canary-p: topic {topic} has no canary partition; "
                                                  "sending to all partitions until it has one (fallback, "
                                                  "availability first)"]
    # nothing lost: the baseline consumer reads every partition, the canary consumer has none to read
    assert not canary_received
    lost = wanted - set(baseline_received)
    print(f"\nfallback: canary producer sent {n} records to partitions {sorted(canary_sent.partitions())}, "
          f"{len(lost)} of {2 * n} acknowledged records not consumed")
    assert not lost
    assert set(read_all(bootstrap, topic)) == wanted
    # asking about a topic that does not exist never creates it
    with LaneView({"bootstrap.servers": bootstrap}, ["clients-never-created"]) as view:
        assert not view.get("clients-never-created").exists
        view.refresh()
        assert "clients-never-created" not in view.admin.list_topics(timeout=10).topics


def test_canary_records_reach_only_canary_consumers_while_canary_partitions_exist(lane_cluster):
    _canary_broker(lane_cluster, on=True)
    bootstrap, topic, n = lane_cluster.bootstrap_servers, "clients-isolation", 1000
    create_topic(bootstrap, topic)
    wait_for_lanes(bootstrap, topic, canary=CANARY_PARTITIONS)
    metrics = ClientMetrics(CollectorRegistry())
    group, run_id = f"svc-{uuid.uuid4().hex[:6]}", f"isolation-{uuid.uuid4().hex[:6]}"
    observed = {"observations": True, "run_id": run_id}
    # the canary consumer carries the marker in group.instance.id only (a static member's id)
    canary_reader = Reading(_consumer(bootstrap, group, {"client.id": "svc-c", "group.instance.id": "svc-canary-0"},
                                      metrics, topic=topic, **observed))
    baseline_reader = Reading(_consumer(bootstrap, group, {"client.id": "svc-c", "group.instance.id": "svc-0"},
                                        metrics, topic=topic, **observed))
    assert canary_reader.consumer.assignment == {(topic, p) for p in CANARY_PARTITIONS}
    assert baseline_reader.consumer.assignment == {(topic, p) for p in BASELINE_PARTITIONS}
    for reader in (canary_reader, baseline_reader):
        reader.start()
    canary_sent, baseline_sent = Sent("canary"), Sent("baseline")
    canary = _producer(bootstrap, "svc-canary-p", topic, metrics=metrics, **observed)
    baseline = _producer(bootstrap, "svc-p", topic, metrics=metrics, **observed)
    try:
        produce(canary, canary_sent, topic, 0, n)
        produce(baseline, baseline_sent, topic, 0, n)
        assert canary.flush(60) == 0 and baseline.flush(60) == 0
    finally:
        canary.close()
        baseline.close()
    try:
        wait_until(lambda: canary_reader.of("canary") >= set(canary_sent.acked)
                   and baseline_reader.of("baseline") >= set(baseline_sent.acked), what="both lanes consumed")
        time.sleep(3)  # anything that would leak across lanes has had its chance to arrive
    finally:
        canary_received, baseline_received = canary_reader.finish(), baseline_reader.finish()

    assert not canary_sent.errors and not baseline_sent.errors
    assert len(canary_sent.acked) == n and len(baseline_sent.acked) == n
    # each producer writes only its lane's partitions; a key stays on one partition
    assert canary_sent.partitions() == set(CANARY_PARTITIONS)
    assert baseline_sent.partitions() == set(BASELINE_PARTITIONS)
    keys = len({f"key-{i % 50}" for i in range(0, n, 2)})  # produce() keys every other record
    assert all(len(ps) == 1 for ps in canary_sent.keys.values()) and len(canary_sent.keys) == keys
    assert all(len(ps) == 1 for ps in baseline_sent.keys.values()) and len(baseline_sent.keys) == keys
    assert _value(metrics, "kafka_canary_client_lane_fallback", client="svc-canary-p", topic=topic, lane="canary") == 0
    # the isolation figure
    leaked = sum(c for (producer, _), c in baseline_received.items() if producer == "canary")
    crossed = sum(c for (producer, _), c in canary_received.items() if producer == "baseline")
    canary_got = len({k for k in canary_received if k[0] == "canary"})
    print(f"\nisolation: baseline consumer received {leaked} of {n} canary-producer records "
          f"({100 * leaked / n:.1f} %); canary consumer received {canary_got}/{n} canary records and {crossed} "
          f"baseline records; baseline consumer {len(set(baseline_received))}/{n} baseline records")
    assert leaked == 0 and crossed == 0
    assert set(canary_received) == set(canary_sent.acked) and set(baseline_received) == set(baseline_sent.acked)

    # every client's observations reached the observations topic, in the client's lane
    observations = _read_observations(bootstrap, run_id, 4 * n)
    by = {(o.source, o.lane, o.ack_ts is not None): 0 for o in observations}
    for o in observations:
        by[(o.source, o.lane, o.ack_ts is not None)] += 1
    assert by == {("svc-canary-p", "canary", True): n, ("svc-p", "baseline", True): n,
                  ("svc-canary-0", "canary", False): n, ("svc-0", "baseline", False): n}
    assert {o.kind for o in observations} == {"client"} and {o.outcome for o in observations} == {"delivered"}
    assert {o.partition for o in observations if o.lane == "canary"} == set(CANARY_PARTITIONS)
    assert {o.leader for o in observations if o.lane == "canary"} == {CANARY_BROKER}
    processed = [o for o in observations if o.ack_ts is None]
    assert all(o.processing_ms is not None and o.lag is not None and o.receive_ts >= o.send_ts for o in processed)
    # the judge's client metrics have data in both lanes (the same machinery as for probe observations)
    agg = Aggregates.from_observations(observations, 10_000)
    for lane in ("canary", "baseline"):
        for metric in ("processing_ms", "lag", "produce_latency_ms", "e2e_latency_ms"):
            assert sum(sum(agg.hist(lane, metric, b).values()) for b in agg.buckets()) > 0, (lane, metric)


def test_a_record_whose_processing_raised_is_not_committed_and_the_next_owner_processes_it(lane_cluster):
    """A canary instance that dies of one record (its exception out of `processing()`): what it processed before is
    committed, the record it died of is not, and the partition's next owner (here another canary instance; after a
    rollback the baseline) starts at that record: the crash skipped nothing."""
    from confluent_kafka import Producer

    _canary_broker(lane_cluster, on=True)
    bootstrap, topic = lane_cluster.bootstrap_servers, "clients-poison"
    create_topic(bootstrap, topic)
    wait_for_lanes(bootstrap, topic, canary=CANARY_PARTITIONS)
    held = CANARY_PARTITIONS[0]
    writer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "logger": QUIET_LOGGER})
    for i in range(50):
        writer.produce(topic, value=f"{held}-{i}".encode(), partition=held)
    assert writer.flush(60) == 0
    poison = f"{held}-20".encode()
    metrics, group = ClientMetrics(CollectorRegistry()), f"poison-{uuid.uuid4().hex[:6]}"
    handled: list[bytes] = []
    canary = _consumer(bootstrap, group, {"group.instance.id": "billing-canary-0"}, metrics, topic=topic)
    try:
        with pytest.raises(ValueError, match="cannot bill"):
            for msg in canary.messages():
                with canary.processing(msg):
                    if msg.value() == poison:
                        raise ValueError("cannot bill this order")
                    handled.append(msg.value())
    finally:
        canary.close()  # the service's last act: it exits on the error
    assert handled == [f"{held}-{i}".encode() for i in range(20)]
    assert _value(metrics, "kafka_canary_client_processing_error_total", client="billing-canary-0", topic=topic,
                  lane="canary") == 1
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "logger": QUIET_LOGGER})
    try:
        (committed,) = reader.committed([TopicPartition(topic, held)], timeout=30)
    finally:
        reader.close()
    assert committed.offset == 20

    taken: list[bytes] = []
    next_owner = _consumer(bootstrap, group, {"group.instance.id": "billing-canary-1"}, metrics, topic=topic)
    try:
        wait_until(lambda: next_owner.process(lambda msg: taken.append(msg.value()), duration=1,
                                              poll_timeout=0.2) >= 0 and len(taken) >= 30,
                   what="the next owner reading the partition from the record the first one died of")
    finally:
        next_owner.close()
    assert taken == [f"{held}-{i}".encode() for i in range(20, 50)]


def test_the_canary_holds_a_record_of_the_fleets_it_failed_retries_it_and_skips_its_own(lane_cluster):
    """A canary that goes on after errors (`process()`), on a real broker: a record of the fleet's it cannot
    process holds its partition there (retried, every attempt an error, nothing after it committed) while its other
    partition goes on; one that fails twice passes on the third attempt, in order; a record a canary client wrote
    (the lane header) is skipped, as the baseline skips."""
    from confluent_kafka import Producer

    _canary_broker(lane_cluster, on=True)
    bootstrap, topic = lane_cluster.bootstrap_servers, "clients-held"
    create_topic(bootstrap, topic)
    wait_for_lanes(bootstrap, topic, canary=CANARY_PARTITIONS)
    held, other = CANARY_PARTITIONS[:2]
    writer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "logger": QUIET_LOGGER})
    for p in (held, other):
        for i in range(50):
            own = p == held and i == 30  # written by a canary: its own output
            writer.produce(topic, value=f"{p}-{i}".encode(), partition=p,
                           headers=[("kafka-canary-lane", b"canary")] if own else None)
    assert writer.flush(60) == 0

    def run(group: str, fails: Callable[[bytes, int], bool], seconds: float) -> tuple[list[bytes], float]:
        metrics, handled, attempts = ClientMetrics(CollectorRegistry()), [], Counter()
        consumer = _consumer(bootstrap, group, {"group.instance.id": "billing-canary-0"}, metrics, topic=topic)

        def handle(msg) -> None:
            attempts[msg.value()] += 1
            if fails(msg.value(), attempts[msg.value()]):
                raise ValueError("cannot bill")
            handled.append(msg.value())
        try:
            deadline = time.monotonic() + seconds
            while time.monotonic() < deadline and len(handled) < 99:
                consumer.process(handle, duration=0.5, poll_timeout=0.2)
        finally:
            consumer.close()
        return handled, _value(metrics, "kafka_canary_client_processing_error_total", client="billing-canary-0",
                               topic=topic, lane="canary")

    stuck, own = f"{held}-20".encode(), f"{held}-30".encode()
    handled, errors = run(f"held-{uuid.uuid4().hex[:6]}", lambda value, _: value in (stuck, own), 8)
    assert [v for v in handled if v.startswith(f"{held}-".encode())] == [f"{held}-{i}".encode() for i in range(20)]
    assert [v for v in handled if v.startswith(f"{other}-".encode())] == [f"{other}-{i}".encode() for i in range(50)]
    assert errors >= 5  # retried while it ran: the judge sees the errors
    group = f"transient-{uuid.uuid4().hex[:6]}"
    handled, errors = run(group, lambda value, attempt: value == own or (value == stuck and attempt <= 2), 30)
    assert [v for v in handled if v.startswith(f"{held}-".encode())] == [
        f"{held}-{i}".encode() for i in range(50) if i != 30]  # in order, the retried one in its place
    assert errors == 3  # two failed attempts and the canary's own record, skipped
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "logger": QUIET_LOGGER})
    try:
        assert [tp.offset for tp in reader.committed([TopicPartition(topic, p) for p in (held, other)],
                                                      timeout=30)] == [50, 50]
    finally:
        reader.close()


@pytest.fixture(scope="module")
def java_classpath(tmp_path_factory) -> str:
    """kafka-canary-lanes (jvm/) and the Java test clients (services/java), compiled."""
    return jvm_lanes.build(tmp_path_factory.mktemp("jvm"))


@pytest.mark.parametrize(("case", "assigned"), [
    ("lanes", {"svc-0-canary": [2, 5], "svc-0": [0, 3], "svc-1": [1, 4]}),
    ("no-canary-member", {"svc-0": [0, 1, 2, 3, 4, 5]}),    # nothing unread while no canary consumer is there
    ("no-baseline-member", {"svc-0-canary": [2, 5]}),       # the version under test never reads the baseline's
    ("leaderless", {"svc-0-canary": [2, 3, 5], "svc-0": [0, 1, 4]}),  # 3 stays with its owner, 4 to the baseline
])
def test_the_lane_assignor_on_crafted_placements(java_classpath, case, assigned):
    """LaneAssignor's rules as a pure function (services/java/LaneAssignorCases.java: crafted metadata and members,
    no broker): a canary member gets exactly the canary broker's partitions, the baseline members share the rest
    round robin in group.instance.id order."""
    out = subprocess.run(["java", "-cp", java_classpath, "LaneAssignorCases", case], capture_output=True, text=True,
                         check=True, timeout=60).stdout
    assert json.loads(out) == assigned


def test_plain_java_clients_keep_to_their_lanes_by_configuration_alone(lane_cluster, tmp_path, java_classpath):
    """JVM services join a lane with kafka-canary-lanes on the classpath and its settings (jvm/): a canary and a
    baseline Java producer (LanePartitioner) write only to their lanes' partitions, and a canary and a baseline
    consumer of one group (LaneAssignor, subscribe()) are each given exactly their lane's partitions and read only
    their lane's records; their interceptors write the observations the judge compares, as LaneProducer and
    LaneConsumer do."""
    _canary_broker(lane_cluster, on=True)
    bootstrap, topic, n = lane_cluster.bootstrap_servers, "clients-jvm", 200
    create_topic(bootstrap, topic)
    wait_for_lanes(bootstrap, topic, canary=CANARY_PARTITIONS)
    classpath = java_classpath
    run_id = f"jvm-{uuid.uuid4().hex[:6]}"
    env = {**os.environ, "KAFKA_CANARY_RUN_ID": run_id}

    def java(*args: str) -> subprocess.Popen:
        return subprocess.Popen(["java", "-cp", classpath, "LaneCheck", *map(str, args)], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def result(proc: subprocess.Popen) -> dict:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err[-2000:]
        return json.loads(out.strip().splitlines()[-1])

    group, stop = f"billing-{run_id}", tmp_path / "stop"
    consumers = {name: java("consume", bootstrap, topic, group, name, n, stop)
                 for name in ("billing-jvm-0-canary", "billing-jvm-0")}
    for proc in consumers.values():  # both in the group before the records come: neither reads the other's lane
        assert proc.stdout.readline().strip() == "assigned"
    produced = {name: result(java("produce", bootstrap, topic, name, n)) for name in ("orders-jvm-canary",
                                                                                      "orders-jvm")}
    for proc in consumers.values():  # both stay in the group until both have read their lane's records
        assert proc.stdout.readline().strip() == "reached"
    stop.touch()
    read = {name: result(proc) for name, proc in consumers.items()}
    print(f"\nJava clients: produced {produced}, consumed {read}")
    assert {int(p) for p in produced["orders-jvm-canary"]["partitions"]} == set(CANARY_PARTITIONS)
    assert {int(p) for p in produced["orders-jvm"]["partitions"]} == set(BASELINE_PARTITIONS)
    assert read["billing-jvm-0-canary"]["assigned"] == list(CANARY_PARTITIONS)
    assert read["billing-jvm-0"]["assigned"] == list(BASELINE_PARTITIONS)
    assert sum(read["billing-jvm-0-canary"]["read"].values()) == n  # the canary producer's, and nothing else
    assert {int(p) for p in read["billing-jvm-0-canary"]["read"]} <= set(CANARY_PARTITIONS)
    assert sum(read["billing-jvm-0"]["read"].values()) == n
    observations = _read_observations(bootstrap, run_id, expected=4 * n)
    seen = Counter((o.source, o.lane, o.outcome, o.ack_ts is not None, o.receive_ts is not None)
                   for o in observations)
    assert seen == {("orders-jvm-canary", "canary", "delivered", True, False): n,
                    ("orders-jvm", "baseline", "delivered", True, False): n,
                    ("billing-jvm-0-canary", "canary", "delivered", False, True): n,
                    ("billing-jvm-0", "baseline", "delivered", False, True): n}, seen
    processed = [o for o in observations if o.receive_ts is not None]
    assert all(o.processing_ms is not None and o.processing_ms >= 0 and o.outputs is None for o in processed)
    assert all(0 <= o.produce_latency_ms < 60_000 for o in observations if o.ack_ts is not None)


def test_the_canary_broker_giving_up_leadership_is_followed_without_losing_acknowledged_records(lane_cluster):
    _canary_broker(lane_cluster, on=True)
    bootstrap, topic = lane_cluster.bootstrap_servers, "clients-leadership"
    create_topic(bootstrap, topic)
    wait_for_lanes(bootstrap, topic, canary=CANARY_PARTITIONS)
    metrics = ClientMetrics(CollectorRegistry())
    group = f"svc-{uuid.uuid4().hex[:6]}"
    canary_reader = Reading(_consumer(bootstrap, group, {"client.id": "svc-canary-c"}, metrics, topic=topic))
    baseline_reader = Reading(_consumer(bootstrap, group, {"client.id": "svc-c"}, metrics, topic=topic))
    canary_sent, baseline_sent = Sent("canary"), Sent("baseline")
    canary = _producer(bootstrap, "svc-canary-p", topic, metrics=metrics, refresh_interval=1)
    baseline = _producer(bootstrap, "svc-p", topic, metrics=metrics, refresh_interval=1)
    sending = [Steady(canary, canary_sent, topic, 40), Steady(baseline, baseline_sent, topic, 40)]
    for thread in (canary_reader, baseline_reader, *sending):
        thread.start()
    try:
        wait_until(lambda: len(canary_sent.acked) >= 100 and len(canary_reader.of("canary")) >= 50,
                   what="canary traffic in the canary lane")
        changed = time.time()
        # broker 3 restarts without the marker: leadership leaves it during the restart, and it comes back baseline
        lane_cluster.restart_node(CANARY_BROKER, rack=None)
        wait_until(lambda: canary.falling_back.get(topic) and not canary_reader.consumer.assignment
                   and len(baseline_reader.consumer.assignment) == PARTITIONS, what="the clients following")
        fell_back = time.time()
        wait_until(lambda: len(canary_sent.partitions(since=fell_back)) == PARTITIONS
                   and len(baseline_sent.partitions(since=fell_back)) == PARTITIONS, what="sending to every partition")
    finally:
        for thread in sending:
            thread.stop.set()
            thread.join(timeout=30)
        left = canary.close(60) + baseline.close(60)
    acked = set(canary_sent.acked) | set(baseline_sent.acked)
    try:
        wait_until(lambda: acked <= set(canary_reader.received) | set(baseline_reader.received), timeout=120,
                   what="every acknowledged record consumed by one lane or the other")
    finally:
        canary_received, baseline_received = canary_reader.finish(), baseline_reader.finish()

    assert left == 0
    # before the change the canary producer stayed in its lane; after it, both producers use every partition
    assert canary_sent.partitions(until=changed) == set(CANARY_PARTITIONS)
    assert canary_sent.partitions(since=fell_back) == set(range(PARTITIONS))
    assert baseline_sent.partitions(until=changed) == set(BASELINE_PARTITIONS)
    assert baseline_sent.partitions(since=fell_back) == set(range(PARTITIONS))
    assert _value(metrics, "kafka_canary_client_lane_fallback", client="svc-canary-p", topic=topic, lane="canary") == 1
    # nothing acknowledged is lost: in the topic, and consumed across the lanes (the canary consumer committed what it
    # processed before letting go, the baseline consumer took over from there)
    in_topic = read_all(bootstrap, topic)
    lost = acked - set(in_topic)
    consumed = canary_received + baseline_received
    duplicates = sum(c - 1 for k, c in consumed.items() if k in acked and c > 1)
    print(f"\nleadership change: {len(acked)} acknowledged ({len(canary_sent.acked)} canary, "
          f"{len(baseline_sent.acked)} baseline), {len(lost)} missing from the topic, "
          f"{len(acked - set(consumed))} not consumed, {duplicates} consumed twice; "
          f"produce errors {len(canary_sent.errors) + len(baseline_sent.errors)}")
    assert not lost
    assert acked <= set(consumed)


# make faults (~40 s, Maven Central's plugins on a fresh machine): the artifact a JVM team adds, built as they would.
@pytest.mark.slow
def test_the_lanes_jar_builds_with_maven():
    pom = jvm_lanes.ROOT / "jvm" / "pom.xml"
    subprocess.run(["mvn", "-q", "-B", "-f", str(pom), "package"], check=True, timeout=600)
    jar = next((pom.parent / "target").glob("kafka-canary-lanes-*.jar"))
    names = subprocess.run(["jar", "tf", str(jar)], capture_output=True, text=True, check=True).stdout.split()
    assert {f"kafkacanary/lanes/{c}.class" for c in ("LanePartitioner", "LaneAssignor", "LaneProducerInterceptor",
                                                      "LaneConsumerInterceptor")} <= set(names)
