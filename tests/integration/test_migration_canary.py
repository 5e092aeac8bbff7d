"""The KIP-848 migration canary on real brokers: on Kafka 4.1.2 (group.version >= 1) three classic instances and one
`group.protocol=consumer` canary share one group while a producer writes and a baseline instance restarts; the
verdict comes with its evidence, and promote leaves every instance on `consumer` with nothing unconsumed; a rollback
returns the canary to `classic` and the coordinator converts the group back; each run is a run of the rollout core
(run.json, audit log, the cluster lock taken and released). On Kafka 3.9 (no group.version) the canary is refused
with the reason, and nothing is started."""

from __future__ import annotations

import json

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from canary.cli import main
from canary.kafka.admin import ROLLOUT_LOCK_TOPIC
from canary.rollout.migration import MigrationRefused, MigrationSpec, describe_group, preflight, run_migration
from canary.storage import open_store

pytestmark = pytest.mark.integration

PARTITIONS = 6


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


def test_migration_canary_on_4_1_promotes_every_instance_to_the_consumer_protocol(cluster_factory, tmp_path):
    bootstrap = _kip848_cluster(cluster_factory, "orders")
    spec = MigrationSpec(bootstrap_servers=bootstrap, topic="orders", group="billing", out_dir=tmp_path / "run",
                         rate=30, window_s=40, disturb_at_s=12)
    with pytest.raises(MigrationRefused, match="topic 'nope' does not exist"):
        preflight(MigrationSpec(bootstrap_servers=bootstrap, topic="nope", group="billing", out_dir=tmp_path))

    result = run_migration(spec)

    lanes, judged, records = result["disruption"]["lanes"], result["judge"]["metrics"], result["verify"]["records"]
    print(f"\nmigration canary on 4.1.2 (policy {result['preflight']['migration_policy']}, default "
          f"{result['preflight']['migration_policy_is_default']}): verdict {result['verdict']}: {result['reason']}")
    for lane, d in lanes.items():
        print(f"  {lane}: {d['slots']} instance(s), totals {d['totals']}, per instance {d['per_instance']}")
    for name, m in judged.items():
        print(f"  {name}: canary {m['canary']} vs baseline {m['baseline']} -> {m['decision']}")
    print(f"  disturbance {result['window']['disturbance']}; {result['action']['name']}: "
          f"{result['action']['settled_s']}; records {records}")

    assert result["preflight"]["group_version"] >= 1
    assert result["window"]["disturbance"]["rejoined"]
    # KIP-848: the canary's untouched partitions are never revoked; the eager classic protocol revokes them all
    assert lanes["canary"]["totals"]["needless"] == 0
    assert lanes["baseline"]["totals"]["needless"] > 0
    assert result["disruption"]["verdict"] == "PROMOTE", result["disruption"]["reason"]
    assert result["verdict"] == "PROMOTE", result["reason"]
    assert result["action"]["name"] == "promote"
    assert result["action"]["switched"] == ["billing-0", "billing-1", "billing-2"]
    verified = result["verify"]
    assert verified["ok"], verified["problems"]
    assert set(verified["protocols"].values()) == {"consumer"}
    assert {m["protocol"] for m in verified["group"]["members"]} == {"consumer"}
    assert verified["group"]["type"] == "CONSUMER"
    assert records["produced"] > 0 and records["unconsumed"] == 0
    written = json.loads((tmp_path / "run" / "result.json").read_text())
    assert written["verdict"] == result["verdict"] and (tmp_path / "run" / "verdict.json").exists()
    # every instance closed at the end: the group is empty again (a retry starts from its commits)
    assert describe_group(AdminClient({"bootstrap.servers": bootstrap}), "billing", 15)["members"] == []
    # a run of the rollout core: its steps and status in run.json, the lock taken and released
    state = json.loads((tmp_path / "run" / "run.json").read_text())
    assert state["status"] == "verified promoted" and state["verdict"]["verdict"] == "PROMOTE"
    assert list(state["steps"]) == ["preflight", "join", "window", "judge", "promote", "verify"]
    audit = [json.loads(line)["action"] for line in (tmp_path / "run" / "audit.jsonl").read_text().splitlines()]
    assert "lock taken" in audit and "lock released" in audit
    assert ROLLOUT_LOCK_TOPIC not in AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=15).topics


# make faults: the rollback path on a cluster of its own (the promote path runs in make test).
@pytest.mark.slow
def test_migration_canary_rolled_back_returns_every_instance_to_classic_with_nothing_lost(cluster_factory, s3_env):
    # A person decided (action: rollback): the canary instance leaves `consumer` for `classic` while traffic goes on.
    # The run's files go to a real S3 server, as a run on a machine with no lasting disk does.
    bootstrap = _kip848_cluster(cluster_factory, "payments")
    out = f"s3://{s3_env.make_bucket('migration-runs')}/ledger"
    spec = MigrationSpec(bootstrap_servers=bootstrap, topic="payments", group="ledger", out_dir=out,
                         rate=30, window_s=25, disturb_at_s=8, action="rollback")

    result = run_migration(spec)

    records = result["verify"]["records"]
    print(f"\nmigration canary rolled back on 4.1.2: verdict {result['verdict']}; switched "
          f"{result['action']['switched']} in {result['action']['settled_s']}; "
          f"group {result['verify']['group']['type']}; records {records}")
    assert result["verdict"] in ("PROMOTE", "ROLLBACK", "INCONCLUSIVE")  # judged, then overruled by the person
    assert result["action"]["name"] == "rollback" and result["action"]["protocol"] == "classic"
    assert result["action"]["switched"] == ["ledger-3-canary"]
    verified = result["verify"]
    assert verified["ok"], verified["problems"]
    assert set(verified["protocols"].values()) == {"classic"}
    assert {m["protocol"] for m in verified["group"]["members"]} == {"classic"}
    # the last consumer-protocol member left: the coordinator converted the group back (migration policy)
    assert verified["group"]["type"] == "CLASSIC"
    assert records["produced"] > 0 and records["unconsumed"] == 0
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
