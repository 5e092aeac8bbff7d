"""The KIP-848 migration canary's spec: its input checks and instance names, the judge settings, the CLI flags and
the spec file that build it, its run id and its secret-free form."""

from __future__ import annotations

from pathlib import Path

import pytest

from canary.cli import build_parser
from canary.rollout.migration import MigrationError, MigrationSpec, judge_config, load_migration_spec
from canary.rollout.migration.cli import spec_from_args
from canary.rollout.migration.spec import MigrationSpecError


def spec(**fields) -> MigrationSpec:
    return MigrationSpec(**{"bootstrap_servers": "x:1", "topic": "t", "group": "g", "out_dir": Path("."), **fields})


@pytest.mark.parametrize("kwargs,message", [
    ({"canary": 0}, "canary: Input should be greater than or equal to 1"),
    ({"baseline": 0}, "baseline: Input should be greater than or equal to 1"),
    ({"rate": -1}, "rate: Input should be greater than or equal to 0"),
    ({"canary": True}, "canary: Input should be a valid int"),
    ({"command": []}, None), ({"command": ["svc", "--id", "{ide}"]}, "command: the consumer command names {ide}"),
    ({"command": ["svc", "{"]}, "is not a template"), ({"env": {"1X": "y"}}, "an environment variable name"),
    ({"disturb_at_s": 70}, "inside the window"), ({"action": "maybe"}, "action: Input should be 'auto'"),
    ({"topic": ""}, "topic: '' must be a topic name"), ({"bootstrap_servers": " "}, "bootstrap_servers: is required"),
    ({"window_s": "ten"}, "window_s: 'ten' must be a duration"),
])
def test_bad_input_is_refused_with_a_reason(kwargs, message):
    if message is None:  # no command: the sample subscribed consumer
        assert spec(**kwargs).command == []
        return
    with pytest.raises(MigrationError, match=message):
        spec(**kwargs)


def test_no_synthetic_records_unless_asked_and_the_teams_command_with_its_environment_is_kept_secret_free():
    assert spec().rate == 0
    team = spec(command=["java", "-jar", "ledger-{version}.jar", "--id", "{id}"], env={"DB_PASSWORD": "pw"},
                version="2.3")
    assert team.to_dict()["env"] == {"DB_PASSWORD": "***"} and "pw" in team.secret_values


def test_every_problem_is_reported_at_once_and_durations_may_be_texts():
    with pytest.raises(MigrationSpecError) as err:
        spec(canary=0, rate="fast", group="a b", windw=3)
    assert [p.split(":")[0] for p in err.value.problems] == ["group", "canary", "rate", "windw"]
    assert "known fields are action, activity_check_s, baseline, bootstrap_servers" in err.value.problems[-1]
    assert (spec(window_s="2m", disturb_at_s="30s").window_s, spec(window_s="2m").disturb_at_s) == (120.0, 20.0)


def test_instance_names_carry_the_canary_marker_only_on_canary_instances():
    assert spec(group="billing", baseline=2, canary=2).names == [
        "billing-0", "billing-1", "billing-2-canary", "billing-3-canary"]


def test_the_judge_compares_only_lag_and_processing_and_a_file_is_merged_over_that(tmp_path):
    config = judge_config()
    assert {m.name for m in config.active} == {"lag_p99", "processing_latency_p99"}
    assert all(m.must_have_data for m in config.active)
    path = tmp_path / "judge.yaml"
    path.write_text("alpha: 0.05\nmetrics:\n  lag_p99:\n    abs_floor: 7\n")
    merged = judge_config(str(path))
    assert merged.alpha == 0.05
    assert {m.name: m.abs_floor for m in merged.active}["lag_p99"] == 7
    assert {m.name: m.min_samples for m in merged.active}["lag_p99"] == 100


def test_the_cli_flags_build_the_spec(tmp_path):
    client = tmp_path / "client.json"
    client.write_text('{"security.protocol": "SSL"}')
    args = build_parser().parse_args(["migrate-protocol", "--bootstrap-servers", "x:1", "--topic", "t", "--group", "g",
                                      "--out", str(tmp_path / "run"), "--canary", "2", "--window", "30",
                                      "--disturb-at", "10", "--client-config", str(client), "--action", "rollback",
                                      "--command", "java -jar 'ledger {version}.jar' --id {id}", "--env", "A=b=c",
                                      "--version", "2.3"])
    spec = spec_from_args(args)
    assert (spec.canary, spec.window_s, spec.disturb_at_s, spec.action) == (2, 30.0, 10.0, "rollback")
    assert (spec.command, spec.env, spec.version, spec.rate) == (
        ["java", "-jar", "ledger {version}.jar", "--id", "{id}"], {"A": "b=c"}, "2.3", 0)
    with pytest.raises(MigrationError, match="--env 'A': give NAME=VALUE"):
        spec_from_args(build_parser().parse_args(["migrate-protocol", "--bootstrap-servers", "x:1", "--topic", "t",
                                                  "--group", "g", "--out", "o", "--env", "A"]))
    assert spec.client == {"security.protocol": "SSL"} and spec.out_dir == str(tmp_path / "run")
    assert args.func.__name__ == "cmd_migrate_protocol"


def test_a_spec_file_builds_the_same_spec_and_refuses_unknown_fields_and_the_environment_adds_secrets(tmp_path):
    path = tmp_path / "migration.yaml"
    path.write_text(f"bootstrap_servers: x:1\ntopic: t\ngroup: g\nout_dir: {tmp_path / 'run'}\nwindow_s: 30\n"
                    f"disturb_at_s: 10\nclient:\n  security.protocol: SASL_SSL\n")
    loaded = load_migration_spec(path, {"KAFKA_CANARY_CLIENT_SASL_PASSWORD": "s3cret"})
    assert loaded == spec(out_dir=tmp_path / "run", window_s=30, disturb_at_s=10,
                          client={"security.protocol": "SASL_SSL", "sasl.password": "s3cret"})
    assert loaded.secret_values == ["s3cret"] and "s3cret" not in str(loaded.to_dict())
    with pytest.raises(MigrationError, match="windw: unknown field"):
        load_migration_spec({"bootstrap_servers": "x:1", "topic": "t", "group": "g", "windw": 3})
    with pytest.raises(MigrationError, match="bootstrap_servers: is required"):
        load_migration_spec({"topic": "t"})


def test_the_run_id_comes_from_the_spec_unless_given():
    run_id = spec(out_dir=Path("runs/a")).effective_run_id
    assert run_id.startswith("migration-") and run_id == spec(out_dir=Path("runs/a")).effective_run_id
    assert run_id != spec(out_dir=Path("runs/b")).effective_run_id
    assert spec(run_id="billing-1").effective_run_id == "billing-1"


@pytest.mark.parametrize("run_id", ["a b/../", 5, ""])
def test_a_run_id_that_is_not_a_name_is_refused(run_id):
    with pytest.raises(MigrationError, match="run_id"):
        load_migration_spec({"bootstrap_servers": "127.0.0.1:9092", "topic": "t", "group": "g", "out_dir": "/tmp/m",
                             "run_id": run_id})
