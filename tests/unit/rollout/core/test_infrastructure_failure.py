"""A deployer that cannot reach a node is no judgment of the change (issue: a host ssh could not reach ended as
verdict ROLLBACK, exit 1, the gate's own answer): the change made so far is still rolled back, for safety, and the
run ends UNFINISHED (exit 4). A command's exit status tells the road from the node: the shell's not found and not
executable, ssh's 255. The deployer's commands for real, the kind's steps with fakes."""

from __future__ import annotations

import json

import pytest

from canary.errors import InfrastructureError
from canary.outcome import Outcome
from canary.rollout.core import RunStatus, run_all
from canary.rollout.core.record import RunRecord
from canary.rollout.deployers import commands

from ..broker.test_resume_after_rollback import FakeRun, fake_kind


@pytest.mark.parametrize(("template", "status", "why"), [
    ("exit 255", 255, "ssh could not reach or log in to the host"),
    ("/nonexistent/kafka-roll {version}", 127, "the command was not found"),
    ("{config_file}", 126, "the command is not executable"),
])
def test_a_command_that_never_reached_the_node_is_an_infrastructure_failure(template, status, why, tmp_path):
    config = tmp_path / "server.properties"
    config.write_text("num.io.threads=6\n")
    with pytest.raises(commands.CommandUnavailable) as failed:
        commands.run("roll", template, {"version": "3.9.2", "config_file": str(config)}, timeout=30)
    assert isinstance(failed.value, InfrastructureError)
    assert f"exited with status {status} ({why}" in str(failed.value)


def test_a_command_that_ran_and_failed_is_the_node_s_answer_not_the_road_s():
    with pytest.raises(commands.CommandFailed) as failed:
        commands.run("roll", "echo broker exited at start >&2; exit 1", {}, timeout=30)
    assert not isinstance(failed.value, InfrastructureError)


def test_a_canary_roll_that_could_not_reach_its_host_rolls_back_and_ends_unfinished(tmp_path):
    run = FakeRun(tmp_path / "run")
    summary = run_all(fake_kind({"deploy-canary"}, commands.CommandUnavailable), run)
    assert run.calls == ["preflight", "deploy-canary", "rollback", "verify"]  # rolled back all the same
    assert run.state.status is RunStatus.VERIFIED_ROLLED_BACK
    verdict = run.state.verdict
    assert verdict is not None and verdict.infrastructure and verdict.engine is None
    assert "the deployer could not reach or drive a node: the change was not judged" in verdict.reason
    assert summary.outcome is Outcome.UNFINISHED and summary.exit_code == 4
    assert run.state.record.steps["deploy-canary"].infrastructure
    stored = RunRecord.load(json.loads((tmp_path / "run" / "run.json").read_text()))
    assert stored.outcome() is Outcome.UNFINISHED  # every reader of run.json says the same


def test_a_canary_roll_that_failed_on_the_node_is_the_gate_s_rollback(tmp_path):
    run = FakeRun(tmp_path / "run")
    summary = run_all(fake_kind({"deploy-canary"}, commands.CommandFailed), run)
    assert run.state.verdict is not None and not run.state.verdict.infrastructure
    assert summary.outcome is Outcome.ROLLBACK and summary.exit_code == 1
