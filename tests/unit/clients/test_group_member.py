"""GroupMember (canary.clients.member) with a fake consumer: the contract's settings, group.protocol and the assignor
for it; one line per rebalance callback that the migration canary's fleet reads back as events; an offset stored
only when processing returned; and the sample subscribed consumer's settings from the same contract."""

from __future__ import annotations

import json
from dataclasses import asdict

import pytest
from confluent_kafka import TopicPartition as TP

from canary.clients import member as member_module
from canary.clients.deployer import CONTRACT, Instance
from canary.clients.member import GroupMember, contract_settings
from canary.rollout.migration.fleet import Fleet
from canary.rollout.migration.spec import MigrationSpec


class FakeConsumer:
    def __init__(self, config):
        self.config, self.stored, self.commits, self.closed, self.callbacks = config, [], 0, False, {}

    def subscribe(self, topics, **callbacks):
        self.topics, self.callbacks = topics, callbacks

    def commit(self, asynchronous=True):
        self.commits += 1

    def store_offsets(self, message):
        self.stored.append(message.offset())

    def get_watermark_offsets(self, tp, cached=False):
        return 0, 10

    def close(self):
        self.closed = True


class FakeMessage:
    def __init__(self, offset: int):
        self._offset = offset

    def topic(self):
        return "payments"

    def partition(self):
        return 2

    def offset(self):
        return self._offset

    def timestamp(self):
        return 1, 1_000


@pytest.fixture
def fake(monkeypatch):
    monkeypatch.setattr(member_module, "Consumer", FakeConsumer)


def _environ(tmp_path, protocol: str, assignor: str = "") -> dict[str, str]:
    (tmp_path / "client.json").write_text(json.dumps({"security.protocol": "SSL"}))
    return {CONTRACT["client_config"]: str(tmp_path / "client.json"), CONTRACT["bootstrap"]: "h:1",
            CONTRACT["group"]: "ledger", CONTRACT["id"]: "ledger-3-canary", CONTRACT["topic"]: "payments",
            CONTRACT["group_protocol"]: protocol, CONTRACT["assignor"]: assignor,
            CONTRACT["rebalances"]: str(tmp_path / "rebalances.jsonl"), CONTRACT["run_id"]: "m-1"}


def test_the_contract_gives_the_protocol_and_the_assignor_setting_of_that_protocol(tmp_path):
    consumer = contract_settings(_environ(tmp_path, "consumer", "uniform"))
    assert (consumer["group.protocol"], consumer["group.remote.assignor"]) == ("consumer", "uniform")
    assert consumer["security.protocol"] == "SSL" and consumer["enable.auto.offset.store"] is False
    classic = contract_settings(_environ(tmp_path, "classic", "cooperative-sticky"))
    assert classic["partition.assignment.strategy"] == "cooperative-sticky" and "group.remote.assignor" not in classic
    assert contract_settings(_environ(tmp_path, ""))["group.protocol"] == "classic"


def test_callbacks_are_logged_one_line_each_and_the_close_is_marked(fake, tmp_path):
    member = GroupMember(contract_settings(_environ(tmp_path, "consumer")), ["payments"],
                         rebalances=tmp_path / "rebalances.jsonl")
    member.subscribe()
    callbacks = member.consumer.callbacks
    callbacks["on_assign"](member.consumer, [TP("payments", 1), TP("payments", 0)])
    callbacks["on_revoke"](member.consumer, [TP("payments", 1)])
    callbacks["on_lost"](member.consumer, [])
    member.close()
    lines = [json.loads(line) for line in (tmp_path / "rebalances.jsonl").read_text().splitlines()]
    assert [(e["kind"], e["partitions"]) for e in lines] == [("assigned", [0, 1]), ("revoked", [1]), ("lost", []),
                                                              ("closing", [])]
    assert {e["lane"] for e in lines} == {"canary"} and len({e["instance"] for e in lines}) == 1
    assert lines[0]["instance"].startswith("ledger-3-canary#")
    assert member.consumer.commits == 1 and member.consumer.closed  # a revocation commits what was processed


def test_an_offset_is_stored_only_when_processing_returned(fake, tmp_path):
    member = GroupMember(contract_settings(_environ(tmp_path, "consumer")), ["payments"])
    with member.processing(FakeMessage(4)):
        pass
    with pytest.raises(ValueError), member.processing(FakeMessage(5)):
        raise ValueError("cannot book it")
    assert member.consumer.stored == [4] and member.processed == 1


def test_the_fleet_reads_the_callbacks_back_as_events_and_skips_a_torn_line(tmp_path):
    spec = MigrationSpec(bootstrap_servers="127.0.0.1:1", topic="payments", group="ledger", service_dir=str(tmp_path))
    fleet = Fleet(spec, [0, 1], "m-1")
    fleet.deployer._save({"ledger-0": asdict(Instance("ledger-0", "consumer", "baseline", "v")) | {
        "pid": None, "started": None}})
    fleet.deployer.rebalances_file("ledger-0").write_text(
        '{"at_ms": 2000, "instance": "ledger-0#9", "lane": "baseline", "kind": "revoked", "partitions": [1]}\n'
        '{"at_ms": 1000, "instance": "ledger-0#9", "lane": "baseline", "kind": "assigned", "partitions": [1, 0]}\n'
        '{"at_ms": 3000, "instance": "ledg')
    events = fleet.events()
    assert [(e.at, e.kind, e.partitions) for e in events] == [(1.0, "assigned", (1, 0)), (2.0, "revoked", (1,))]
