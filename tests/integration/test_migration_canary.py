"""The KIP-848 migration canary on real brokers, running a service a team wrote (tests/integration/services/ledger.py,
a subscribed consumer given the instance contract as processes): on Kafka 4.1.2 (group.version >= 1) three classic
instances and one `group.protocol=consumer` canary share one group while the team's own upstream producer writes
(the canary writes nothing into the topic) and a baseline instance restarts; the verdict comes with its evidence, and
promote leaves every instance on `consumer` with every acknowledged record booked; a rollback returns the canary to
`classic` and the coordinator converts the group back; each run is a run of the rollout core (run.json, audit log,
the cluster lock taken and released). The same service in Java (services/java/Ledger.java) is promoted too. A group
that consumers commit in with assign() is refused. On Kafka 3.9 (no group.version) the canary is refused with the
reason, and nothing is started."""

from __future__ import annotations

import json
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import jvm_lanes
import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as TP
from confluent_kafka.admin import AdminClient, NewTopic

from canary.cli import main
from canary.kafka.admin import ROLLOUT_LOCK_TOPIC
from canary.rollout.migration import MigrationRefused, MigrationSpec, describe_group, preflight, run_migration
from canary.storage import open_store

pytestmark = pytest.mark.integration

PARTITIONS = 6
LEDGER = [sys.executable, str(Path(__file__).parent / "services" / "ledger.py")]


def _topic(bootstrap: str, name: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(name, PARTITIONS, 3, config={"min.insync.replicas": "2"})]).values():
        future.result(timeout=60)


def _kip848_cluster(cluster_factory, topic: str) -> str:
    """A 4.1.2 cluster with group.version >= 1 and `topic`; returns its bootstrap servers."""
    cluster = cluster_factory(brokers=3, version="4.1.2")
    if cluster.features().finalized.get("group.version", 0) < 1:
        cluster.finalize(levels={"group.version": 1})
    _topic(cluster.bootstrap_servers, topic)
    return cluster.bootstrap_servers


class Upstream:
    """The team's own producer of payments: `rate` records/s over every partition, each acknowledgement kept."""

    def __init__(self, bootstrap: str, topic: str, rate: float = 30):
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
        self.topic, self.rate, self.acked, self.failed = topic, rate, set(), 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _delivered(self, err, msg) -> None:
        if err is None:
            self.acked.add((msg.partition(), msg.offset()))
        else:
            self.failed += 1

    def _run(self) -> None:
        n, started = 0, time.monotonic()
        while not self.stop.is_set():
            value = json.dumps({"account": f"a{n % 17}", "amount": n % 100, "n": n}).encode()
            self.producer.produce(self.topic, value, partition=n % PARTITIONS, on_delivery=self._delivered)
            self.producer.poll(0)
            n += 1
            self.stop.wait(max(0.0, started + n / self.rate - time.monotonic()))

    def __enter__(self) -> Upstream:
        self.thread.start()
        return self

    def __exit__(self, *_) -> None:
        self.stop.set()
        self.thread.join(10)
        self.producer.flush(30)


def _booked(service_dir: Path) -> Counter:
    """(partition, offset) -> how many times the ledger's instances booked it, from their records files."""
    booked: Counter = Counter()
    for path in service_dir.glob("*.records.jsonl"):
        for line in path.read_text().splitlines():
            entry = json.loads(line)
            booked[(entry["partition"], entry["offset"])] += 1
    return booked


def _check_records(result: dict, upstream: Upstream, service_dir: Path) -> dict:
    """Every record the upstream had acknowledged below the ends verify read was booked; returns the counts."""
    ends = {int(p): end for p, end in result["verify"]["records"]["ends"].items()}
    before_verify = {(p, o) for p, o in upstream.acked if o < ends[p]}
    booked = _booked(service_dir)
    missing = before_verify - set(booked)
    twice = sum(1 for record, times in booked.items() if times > 1)
    assert before_verify and not missing, f"{len(missing)} acknowledged payment(s) never booked"
    return {"acknowledged_before_verify": len(before_verify), "missing": len(missing), "booked_twice": twice}


def _commits_in(bootstrap: str, group: str, topic: str, stop: threading.Event) -> None:
    """A consumer that assign()s every partition and commits in `group` without joining it (as lane consumers do)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    consumer.assign([TP(topic, p, -2) for p in range(PARTITIONS)])
    try:
        while not stop.is_set():
            if consumer.poll(0.2) is not None:
                consumer.commit(asynchronous=False)
    finally:
        consumer.close()


def _promoted(cluster_factory, tmp_path, command: list[str], version: str) -> tuple[dict, Upstream, Path, str]:
    """The migration canary of the ledger service `command` on a 4.1.2 cluster while its upstream writes; checks
    the promotion as every service must show it. Returns the result, the upstream, the instances' directory and the
    bootstrap servers."""
    bootstrap = _kip848_cluster(cluster_factory, "payments")
    service_dir = tmp_path / "instances"
    spec = MigrationSpec(bootstrap_servers=bootstrap, topic="payments", group="ledger", out_dir=tmp_path / "run",
                         command=command, version=version, service_dir=str(service_dir), window_s=40,
                         disturb_at_s=12)
    with Upstream(bootstrap, "payments") as upstream:
        result = run_migration(spec)

    lanes, judged = result["disruption"]["lanes"], result["judge"]["metrics"]
    records = _check_records(result, upstream, service_dir)
    print(f"\nmigration canary of {command[-1]} on 4.1.2 (policy {result['preflight']['migration_policy']}, default "
          f"{result['preflight']['migration_policy_is_default']}): verdict {result['verdict']}: {result['reason']}")
    for lane, d in lanes.items():
        print(f"  {lane}: {d['slots']} instance(s), totals {d['totals']}, per instance {d['per_instance']}")
    for name, m in judged.items():
        print(f"  {name}: canary {m['canary']} vs baseline {m['baseline']} -> {m['decision']}")
    print(f"  disturbance {result['window']['disturbance']}; {result['window']['observed']} observations; "
          f"{result['action']['name']}: {result['action']['settled_s']}; records {records}; upstream acknowledged "
          f"{len(upstream.acked)}, failed {upstream.failed}")

    assert result["window"]["disturbance"]["rejoined"]
    # KIP-848: the canary's untouched partitions are never revoked; the eager classic protocol revokes them all
    assert lanes["canary"]["totals"]["needless"] == 0
    assert lanes["baseline"]["totals"]["needless"] > 0
    assert result["disruption"]["verdict"] == "PROMOTE", result["disruption"]["reason"]
    assert result["verdict"] == "PROMOTE", result["reason"]
    assert result["action"]["name"] == "promote"
    assert result["action"]["switched"] == ["ledger-0", "ledger-1", "ledger-2"]
    verified = result["verify"]
    assert verified["ok"], verified["problems"]
    assert set(verified["protocols"].values()) == {"consumer"}
    assert {m["protocol"] for m in verified["group"]["members"]} == {"consumer"}
    assert verified["group"]["type"] == "CONSUMER"
    assert verified["records"]["short"] == {} and verified["records"]["synthetic"] is None
    # every instance stopped at the end: the group is empty again (a retry starts from its commits)
    assert describe_group(AdminClient({"bootstrap.servers": bootstrap}), "ledger", 15)["members"] == []
    assert not (service_dir / "client.json").exists()
    return result, upstream, service_dir, bootstrap


def test_migration_canary_on_4_1_promotes_the_teams_service_to_the_consumer_protocol(cluster_factory, tmp_path):
    result, _, service_dir, bootstrap = _promoted(cluster_factory, tmp_path, LEDGER, "4.2")

    assert result["preflight"]["group_version"] >= 1
    # the team's service ran: its instances said which protocol they were given
    logs = {path.stem: path.read_text() for path in service_dir.glob("*.log")}
    assert "ledger 4.2 as ledger-3-canary on consumer" in logs["ledger-3-canary"]
    assert "ledger 4.2 as ledger-0 on consumer" in logs["ledger-0"]  # after promote
    written = json.loads((tmp_path / "run" / "result.json").read_text())
    assert written["verdict"] == result["verdict"] and (tmp_path / "run" / "verdict.json").exists()
    # a run of the rollout core: its steps and status in run.json, the lock taken and released
    state = json.loads((tmp_path / "run" / "run.json").read_text())
    assert state["status"] == "verified promoted" and state["verdict"]["verdict"] == "PROMOTE"
    assert list(state["steps"]) == ["preflight", "join", "window", "judge", "promote", "verify"]
    audit = [json.loads(line)["action"] for line in (tmp_path / "run" / "audit.jsonl").read_text().splitlines()]
    assert "lock taken" in audit and "lock released" in audit
    assert ROLLOUT_LOCK_TOPIC not in AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=15).topics

    # another team's lane consumers commit in their group without joining it: that group is refused
    stop = threading.Event()
    assigned = threading.Thread(target=_commits_in, args=(bootstrap, "audit", "payments", stop), daemon=True)
    assigned.start()
    try:
        with pytest.raises(MigrationRefused, match="'audit' has no member, yet its committed offsets moved"):
            preflight(MigrationSpec(bootstrap_servers=bootstrap, topic="payments", group="audit", out_dir=tmp_path,
                                    activity_check_s=4))
    finally:
        stop.set()
        assigned.join(15)
    with pytest.raises(MigrationRefused, match="topic 'nope' does not exist"):
        preflight(MigrationSpec(bootstrap_servers=bootstrap, topic="nope", group="ledger", out_dir=tmp_path))


# make faults: the same service written in Java (kafka-canary-lanes' interceptor and RebalanceLog).
@pytest.mark.slow
def test_migration_canary_promotes_a_java_service(cluster_factory, tmp_path):
    command = ["java", "-cp", jvm_lanes.build(tmp_path / "jvm"), "Ledger"]
    _, _, service_dir, _ = _promoted(cluster_factory, tmp_path, command, "4.2-java")
    logs = {path.stem: path.read_text() for path in service_dir.glob("*.log")}
    assert "ledger 4.2-java as ledger-3-canary on consumer (java)" in logs["ledger-3-canary"]


# make faults: the rollback path on a cluster of its own (the promote path runs in make test).
@pytest.mark.slow
def test_migration_canary_rolled_back_returns_every_instance_to_classic_with_nothing_lost(cluster_factory, s3_env,
                                                                                          tmp_path):
    # A person decided (action: rollback): the canary instance leaves `consumer` for `classic` while traffic goes on.
    # The sample subscribed consumer is the service, and the canary writes synthetic records (asked: rate).
    # The run's files go to a real S3 server, as a run on a machine with no lasting disk does.
    bootstrap = _kip848_cluster(cluster_factory, "payments")
    out = f"s3://{s3_env.make_bucket('migration-runs')}/ledger"
    spec = MigrationSpec(bootstrap_servers=bootstrap, topic="payments", group="ledger", out_dir=out,
                         service_dir=str(tmp_path / "instances"), rate=30, window_s=25, disturb_at_s=8,
                         action="rollback")

    result = run_migration(spec)

    records = result["verify"]["records"]
    booked = _booked(tmp_path / "instances")
    print(f"\nmigration canary rolled back on 4.1.2: verdict {result['verdict']}; switched "
          f"{result['action']['switched']} in {result['action']['settled_s']}; "
          f"group {result['verify']['group']['type']}; records {records}; booked {len(booked)}")
    assert result["verdict"] in ("PROMOTE", "ROLLBACK", "INCONCLUSIVE")  # judged, then overruled by the person
    assert result["action"]["name"] == "rollback" and result["action"]["protocol"] == "classic"
    assert result["action"]["switched"] == ["ledger-3-canary"]
    verified = result["verify"]
    assert verified["ok"], verified["problems"]
    assert set(verified["protocols"].values()) == {"classic"}
    assert {m["protocol"] for m in verified["group"]["members"]} == {"classic"}
    # the last consumer-protocol member left: the coordinator converted the group back (migration policy)
    assert verified["group"]["type"] == "CLASSIC"
    synthetic = records["synthetic"]
    assert synthetic["acknowledged"] > 0 and synthetic["failed"] == 0 and records["short"] == {}
    ends = {int(p): end for p, end in records["ends"].items()}
    assert sum(ends.values()) == synthetic["acknowledged"]  # the topic holds only the canary's records
    assert {(p, o) for p, end in ends.items() for o in range(end)} <= set(booked)
    stored = open_store(out)
    assert json.loads(stored.read("result.json") or b"{}")["action"]["name"] == "rollback"
    assert json.loads(stored.read("run.json") or b"{}")["status"] == "verified rolled_back"
    assert json.loads(stored.read("verdict.json") or b"{}")["verdict"] == result["judge"]["verdict"]
    assert "lock released" in [json.loads(line)["action"] for line in stored.lines("audit.jsonl")]


def test_migration_canary_on_3_9_is_refused_and_changes_nothing(cluster_factory, tmp_path, capsys):
    cluster = cluster_factory(brokers=3)  # the default version, 3.9: no group.version to finalize
    bootstrap = cluster.bootstrap_servers
    _topic(bootstrap, "orders")
    out = tmp_path / "run"

    code = main(["migrate-protocol", "--bootstrap-servers", bootstrap, "--topic", "orders", "--group", "billing",
                 "--out", str(out)])

    error = capsys.readouterr().err
    print(f"\nrefused on {cluster.features().finalized}: {error.strip()}")
    assert code == 2
    assert "group.version is finalized at 0" in error and "Kafka 4.0 or newer" in error
    assert "Nothing was changed" in error
    assert json.loads((out / "result.json").read_text())["refused"]
    assert not (out / "observations.jsonl").exists()
    assert json.loads((out / "run.json").read_text())["steps"]["preflight"]["status"] == "failed"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    # ListGroups asks every broker and needs no coordinator (a cluster no consumer used has no offsets topic yet)
    groups = admin.list_consumer_groups(request_timeout=30).result(timeout=40).valid
    assert "billing" not in {g.group_id for g in groups}
    assert admin.list_topics("orders", timeout=15).topics["orders"].partitions.keys() == set(range(PARTITIONS))
    assert ROLLOUT_LOCK_TOPIC not in admin.list_topics(timeout=15).topics  # refused before the lock
