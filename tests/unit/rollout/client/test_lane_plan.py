"""The client rollout's spec and its pure planning: which partitions open the canary lane, how the lane closes,
which instances each lane runs."""

from __future__ import annotations

import pytest

from canary.rollout.client import fleet
from canary.rollout.client.lane_plan import LanePlanError, canary_partitions, candidates, plan_open, plan_restore
from canary.rollout.client.spec import ClientRolloutSpec, load_client_spec
from canary.rollout.core.spec import SpecError

# Broker 3 is never first: outside a rollout the topic has no canary partition.
REPLICAS = {0: [1, 2, 3], 1: [2, 1, 3], 2: [1, 3, 2], 3: [2, 3, 1], 4: [1, 2], 5: [2, 1]}

GOOD = {"cluster": {"dir": "/tmp/kc"},
        "service": {"name": "orders", "topic": "orders", "group": "billing", "dir": "/tmp/fleet", "producers": 1,
                    "consumers": 2, "rate": 10},
        "change": {"from": "v1", "to": "v2"}, "lane": {"partitions": 2},
        "window": {"duration": "30s", "interim_interval": "10s"}, "judge": {"engine": "inline"}}


def test_open_puts_a_canary_broker_first_for_the_lowest_candidates_and_keeps_the_replica_set():
    plan = plan_open(REPLICAS, [3], 2, "orders")
    assert plan == {0: [3, 1, 2], 1: [3, 2, 1]}
    assert all(sorted(plan[p]) == sorted(REPLICAS[p]) for p in plan)  # a reorder moves no data
    assert candidates(REPLICAS, [3]) == [0, 1, 2, 3]


def test_open_shares_the_lane_between_canary_brokers():
    plan = plan_open(REPLICAS, [1, 2], 2)
    assert plan == {0: [1, 2, 3], 1: [2, 1, 3]}  # one partition led by each canary broker


def test_open_refuses_without_canary_broker_and_says_how_to_mark_one():
    with pytest.raises(LanePlanError, match="no canary broker.*--rack canary-broker"):
        plan_open(REPLICAS, [], 1)


def test_open_refuses_when_no_partition_has_a_replica_on_the_canary_broker():
    with pytest.raises(LanePlanError, match=r"no replica on the canary broker\(s\) \[4\]"):
        plan_open(REPLICAS, [4], 1, "orders")


def test_open_refuses_too_many_and_leaving_no_baseline():
    with pytest.raises(LanePlanError, match="only 4 partition"):
        plan_open(REPLICAS, [3], 5)
    with pytest.raises(LanePlanError, match="leaves no baseline"):
        plan_open(REPLICAS, [1], 6)


def test_restore_brings_back_only_the_changed_replica_lists():
    now = dict(REPLICAS) | plan_open(REPLICAS, [3], 2)
    assert plan_restore(REPLICAS, now) == {0: [1, 2, 3], 1: [2, 1, 3]}
    assert plan_restore(REPLICAS, REPLICAS) == {}


def test_canary_partitions_are_the_ones_led_by_a_canary_broker():
    assert canary_partitions({0: 3, 1: 1, 2: 3, 3: -1}, [3]) == [0, 2]


def test_spec_parses_and_names_the_fleet():
    spec = load_client_spec(GOOD)
    assert isinstance(spec, ClientRolloutSpec)
    assert (spec.change.from_, spec.change.to, spec.lane.partitions, spec.window.duration) == ("v1", "v2", 2, 30.0)
    assert spec.service.observations_run_id == "orders-service"
    assert spec.effective_run_id.startswith("client-rollout-")
    assert [(i.name, i.role, i.lane, i.instance, i.instances) for i in fleet(spec, "v1")] == [
        ("orders-producer-0", "producer", "baseline", 0, 1), ("orders-consumer-0", "consumer", "baseline", 0, 2),
        ("orders-consumer-1", "consumer", "baseline", 1, 2)]
    assert [(i.name, i.lane, i.version) for i in fleet(spec, "v2", "canary")] == [
        ("orders-producer-0-canary", "canary", "v2"), ("orders-consumer-0-canary", "canary", "v2")]
    # the client-rollout judge decides on the client metrics
    metrics = {m.name: m for m in spec.judge_settings().active}
    assert metrics["processing_error_rate"].must_have_data and "throughput" not in metrics


def test_a_service_of_ones_own_is_named_by_its_commands_and_kept_only_when_given():
    assert "command" not in load_client_spec(GOOD).to_dict()["service"]  # a run.json of before still matches
    own = {**GOOD, "service": {**GOOD["service"], "command": {"producer": ["./feed", "--rate", "{rate}"],
                                                              "consumer": ["java", "-jar", "billing-{version}.jar"]},
                               "env": {"JAVA_OPTS": "-Xmx256m", "DB_PASSWORD": "hunter2"}, "cwd": "/srv/billing"}}
    stored = load_client_spec(own).to_dict()["service"]
    assert stored["command"]["consumer"] == ["java", "-jar", "billing-{version}.jar"]
    assert stored["cwd"] == "/srv/billing"
    assert stored["env"] == {"JAVA_OPTS": "-Xmx256m", "DB_PASSWORD": "***"}


@pytest.mark.parametrize("command, problem", [
    ({"producer": ["./feed"], "consumer": ["./billing", "{colour}"]},
     "the consumer command names {colour}; an instance's placeholders are {id}, {role}, {lane}"),
    ({"consumer": ["./billing"]}, "command has no producer command but the service has 1 producer(s)"),
    ({"producer": [], "consumer": ["./billing"]}, "the producer command is empty"),
    ({"producer": ["./feed", "{"], "consumer": ["./billing"]}, "is not a template"),
], ids=["unknown-placeholder", "a-role-without-command", "empty", "lone-brace"])
def test_a_service_command_that_cannot_mean_anything_is_refused(command, problem):
    with pytest.raises(SpecError) as err:
        load_client_spec({**GOOD, "service": {**GOOD["service"], "command": command}})
    assert problem in str(err.value), str(err.value)


def test_spec_lists_every_problem_at_once():
    bad = {"cluster": {}, "service": {"name": "orders", "topic": "bad topic!", "producers": 0, "consumers": 0,
                                      "colour": "red"},
           "change": {"from": "v1", "to": "v1"}, "lane": {"partitions": 0},
           "window": {"duration": "5s"}, "judge": {"engine": "excel"}, "extra": 1}
    with pytest.raises(SpecError) as err:
        load_client_spec(bad)
    text = "\n".join(err.value.problems)
    for expected in ("extra: unknown field", "cluster.dir", "service.colour: unknown field", "service.topic",
                     "service.group: is required", "service.dir", "producers and consumers are both 0",
                     "nothing would change", "lane.partitions", "window.duration", "judge.engine"):
        assert expected in text
    assert str(err.value).startswith("the rollout spec is not valid, nothing was changed:")


def test_spec_file_errors_are_spec_errors(tmp_path):
    with pytest.raises(SpecError, match="cannot read the spec file"):
        load_client_spec(tmp_path / "missing.yaml")
    (tmp_path / "s.yaml").write_text("cluster: [")
    with pytest.raises(SpecError, match="not valid YAML"):
        load_client_spec(tmp_path / "s.yaml")
