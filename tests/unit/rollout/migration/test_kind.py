"""The migration canary as a kind of the rollout core, without Kafka: the engine carries out a person's action
whatever the verdict, an unfinished run in the output directory starts over (its instances died with its process),
a verified one is finished, another spec's run is refused, and the kind has no per-step commands."""

from __future__ import annotations

import dataclasses
import json

import pytest

from canary.cli import build_parser
from canary.rollout.core import RolloutError, RunStatus, Step, run_all
from canary.rollout.migration import MIGRATION, MigrationError, MigrationRun, MigrationSpec


def fake_kind(verdict: str, done: list[str]):
    """MIGRATION with steps that only record their name: judge reaches `verdict`."""

    def judge(run):
        done.append("judge")
        run.state.update(verdict={"verdict": verdict, "reason": "fake"}, status=RunStatus.judged(verdict))
        return {"verdict": verdict}

    def act(name, status):
        def step(run, **_):
            done.append(name)
            run.state.update(status=status)
            return {}
        return step

    def verify(run):
        done.append("verify")
        run.state.update(status=run.state.status.as_verified())
        return {}

    return dataclasses.replace(MIGRATION, steps=(Step("judge", judge, "", decides=True),),
                               promote=Step("promote", act("promote", RunStatus.PROMOTED), "", after_rollback=True),
                               rollback=Step("rollback", act("rollback", RunStatus.ROLLED_BACK), "",
                                             after_rollback=True),
                               verify=Step("verify", verify, "", after_rollback=True))


@pytest.mark.parametrize("verdict,action,want", [
    ("PROMOTE", "auto", "promote"), ("ROLLBACK", "auto", "rollback"), ("INCONCLUSIVE", "auto", "rollback"),
    ("PROMOTE", "rollback", "rollback"), ("ROLLBACK", "promote", "promote"),
])
def test_the_engine_carries_out_the_verdict_or_the_persons_action(tmp_path, verdict, action, want):
    done: list[str] = []
    spec = MigrationSpec(bootstrap_servers="x:1", topic="t", group="g", out_dir=tmp_path, action=action)
    result = run_all(fake_kind(verdict, done), MigrationRun(spec),
                     decided=None if action == "auto" else action)
    assert done == ["judge", want, "verify"]
    assert result.outcome == ("PROMOTE" if want == "promote" else "ROLLBACK")
    assert result.exit_code == (0 if want == "promote" else 1) and result.status.verified
    audit = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]
    assert [(e["step"], e["action"]) for e in audit if e["action"] == "step finished"] == [
        ("judge", "step finished"), (want, "step finished"), ("verify", "step finished")]


def test_an_unfinished_run_starts_over_and_a_verified_one_is_finished(tmp_path):
    spec = MigrationSpec(bootstrap_servers="x:1", topic="t", group="g", out_dir=tmp_path)
    first = MigrationRun(spec)
    first.state.step_started("join")
    first.state.update(status=RunStatus.CANARY_DEPLOYED)

    again = MigrationRun(spec)

    assert again.state.record.steps == {} and again.state.status is RunStatus.NEW
    assert json.loads((tmp_path / "audit.jsonl").read_text().splitlines()[-1])["action"] == "started over"
    again.state.update(status=RunStatus.VERIFIED_PROMOTED)
    (tmp_path / "result.json").write_text('{"verdict": "PROMOTE"}')
    assert MigrationRun(spec).result == {"verdict": "PROMOTE"}


def test_another_specs_run_in_the_output_directory_is_refused(tmp_path):
    MigrationRun(MigrationSpec(bootstrap_servers="x:1", topic="t", group="g", out_dir=tmp_path))
    with pytest.raises(MigrationError, match="another --out"):
        MigrationRun(MigrationSpec(bootstrap_servers="x:1", topic="t", group="g", out_dir=tmp_path, window_s=30))


def test_a_session_step_without_the_join_of_this_process_is_refused(tmp_path):
    run = MigrationRun(MigrationSpec(bootstrap_servers="x:1", topic="t", group="g", out_dir=tmp_path))
    with pytest.raises(RolloutError, match="run together"):
        MIGRATION.step("window")(run)
    assert run.state.record.steps["window"].status == "failed"


def test_the_kind_runs_its_steps_only_together():
    assert not MIGRATION.step_by_step and MIGRATION.changing_steps == ()
    assert [s.name for s in MIGRATION.all_steps] == ["preflight", "join", "window", "judge", "promote", "rollback",
                                                     "verify"]
    args = build_parser().parse_args(["migrate-protocol", "--bootstrap-servers", "x:1", "--topic", "t", "--group",
                                      "g", "--out", "o"])
    assert args.kind is MIGRATION


@pytest.mark.parametrize("files", [{"run.json": "not json"}, {"run.json": "[1]"}, {"report.html": "<p>theirs</p>"}])
def test_an_output_directory_of_another_tool_is_refused_and_left_as_it_was(tmp_path, files):
    from canary.rollout.core.run import RunStateError

    for name, text in files.items():
        (tmp_path / name).write_text(text)
    with pytest.raises(RunStateError, match="no run of kafka-canary's"):
        MigrationRun(MigrationSpec(bootstrap_servers="x:1", topic="t", group="g", out_dir=tmp_path))
    assert {p.name: p.read_text() for p in tmp_path.iterdir()} == files
