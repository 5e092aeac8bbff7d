"""The KIP-848 migration canary's spec: its input checks and instance names, the judge settings, the action after
the verdict, and the CLI flags that build the spec."""

from __future__ import annotations

from pathlib import Path

import pytest

from canary.cli import build_parser
from canary.rollout.migration import MigrationError, MigrationSpec, judge_config
from canary.rollout.migration.cli import spec_from_args
from canary.rollout.migration.phases import chosen_action


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


@pytest.mark.parametrize("action,verdict,want", [
    ("auto", "PROMOTE", "promote"), ("auto", "ROLLBACK", "rollback"), ("auto", "INCONCLUSIVE", "rollback"),
    ("promote", "ROLLBACK", "promote"), ("rollback", "PROMOTE", "rollback"),
])
def test_auto_promotes_only_on_promote_and_a_persons_choice_overrules_the_verdict(action, verdict, want):
    assert chosen_action(action, verdict) == want


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
