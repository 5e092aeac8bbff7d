"""The KIP-848 migration canary's spec: its input checks and instance names, the judge settings, the CLI flags and
the spec file that build it, its run id and its secret-free form."""

from __future__ import annotations

from pathlib import Path

import pytest

from canary.cli import build_parser
from canary.rollout.migration import MigrationError, MigrationSpec, judge_config, load_migration_spec
from canary.rollout.migration.cli import spec_from_args


@pytest.mark.parametrize("kwargs,message", [
    ({"canary": 0}, "N >= 2"), ({"baseline": 0}, "N >= 2"), ({"rate": 0}, "rate"),
    ({"disturb_at_s": 70}, "inside the window"), ({"action": "maybe"}, "action"), ({"topic": ""}, "required"),
])
def test_bad_input_is_refused_with_a_reason(kwargs, message):
    spec = MigrationSpec(**{"bootstrap_servers": "x:1", "topic": "t", "group": "g", "out_dir": Path("."), **kwargs})
    with pytest.raises(MigrationError, match=message):
        spec.validate()


def test_instance_names_carry_the_canary_marker_only_on_canary_instances():
    spec = MigrationSpec(bootstrap_servers="x:1", topic="t", group="billing", out_dir=Path("."), baseline=2, canary=2)
    assert spec.names == ["billing-0", "billing-1", "billing-2-canary", "billing-3-canary"]


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
                                      "--disturb-at", "10", "--client-config", str(client), "--action", "rollback"])
    spec = spec_from_args(args)
    assert (spec.canary, spec.window_s, spec.disturb_at_s, spec.action) == (2, 30.0, 10.0, "rollback")
    assert spec.client == {"security.protocol": "SSL"} and spec.out_dir == tmp_path / "run"
    assert args.func.__name__ == "cmd_migrate_protocol"


def test_a_spec_file_builds_the_same_spec_and_refuses_unknown_fields_and_the_environment_adds_secrets(tmp_path):
    path = tmp_path / "migration.yaml"
    path.write_text(f"bootstrap_servers: x:1\ntopic: t\ngroup: g\nout_dir: {tmp_path / 'run'}\nwindow_s: 30\n"
                    f"disturb_at_s: 10\nclient:\n  security.protocol: SASL_SSL\n")
    spec = load_migration_spec(path, {"KAFKA_CANARY_CLIENT_SASL_PASSWORD": "s3cret"})
    assert spec == MigrationSpec("x:1", "t", "g", tmp_path / "run", window_s=30, disturb_at_s=10,
                                 client={"security.protocol": "SASL_SSL", "sasl.password": "s3cret"})
    assert spec.secret_values == ["s3cret"] and "s3cret" not in str(spec.to_dict())
    with pytest.raises(MigrationError, match="unknown field.*windw"):
        load_migration_spec({"bootstrap_servers": "x:1", "topic": "t", "group": "g", "windw": 3})
    with pytest.raises(MigrationError, match="incomplete"):
        load_migration_spec({"topic": "t"})


def test_the_run_id_comes_from_the_spec_unless_given():
    spec = MigrationSpec("x:1", "t", "g", Path("runs/a"))
    assert spec.effective_run_id.startswith("migration-")
    assert spec.effective_run_id == MigrationSpec("x:1", "t", "g", Path("runs/a")).effective_run_id
    assert spec.effective_run_id != MigrationSpec("x:1", "t", "g", Path("runs/b")).effective_run_id
    assert MigrationSpec("x:1", "t", "g", Path("."), run_id="billing-1").effective_run_id == "billing-1"


@pytest.mark.parametrize("run_id", ["a b/../", 5, ""])
def test_a_run_id_that_is_not_a_name_is_refused(run_id):
    with pytest.raises(MigrationError, match="run_id"):
        load_migration_spec({"bootstrap_servers": "127.0.0.1:9092", "topic": "t", "group": "g", "out_dir": "/tmp/m",
                             "run_id": run_id})
