"""The run's typed record (canary.rollout.core.record): run.json written by an earlier kafka-canary still loads and
says the same outcome; a record survives its own serialization; the status alone decides the outcome and the exit
code, an unfinished run included; two writers of one run.json still keep each other's steps; and `rollout run`
exits UNFINISHED when a step stops the run."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from canary.judge import Brief
from canary.outcome import EXIT_CODES, Outcome
from canary.rollout.broker import BROKER
from canary.rollout.broker.record import BrokerRunRecord
from canary.rollout.broker.spec import load_spec
from canary.rollout.core import RolloutError, RunStatus, Verdict, Window
from canary.rollout.core.cli import RunUnfinished, cmd_run
from canary.rollout.core.record import SCHEMA, Look, StepStatus
from canary.rollout.core.run import RunState, RunStateError
from canary.rollout.records import load_record
from canary.rollout.report import write_report

from ..fake_steps import with_fake_steps

FIXTURES = Path(__file__).parent / "fixtures"
# run.json of two finished broker rollouts, as kafka-canary wrote them before the record was typed (schema 1).
PROMOTED = FIXTURES / "broker-promoted-schema1.json"
ROLLED_BACK = FIXTURES / "broker-rolled-back-schema1.json"


def _raw(path: Path) -> dict:
    return json.loads(path.read_text())


@pytest.mark.parametrize("path, status, outcome, code", [
    (PROMOTED, RunStatus.VERIFIED_PROMOTED, Outcome.PROMOTE, 0),
    (ROLLED_BACK, RunStatus.VERIFIED_ROLLED_BACK, Outcome.ROLLBACK, 1),
])
def test_a_schema_1_run_json_loads_with_its_outcome_and_exit_code(path, status, outcome, code):
    raw = _raw(path)
    assert raw["schema"] == 1
    record = load_record(raw)
    assert isinstance(record, BrokerRunRecord) and record.kind == "broker"
    assert (record.status, record.outcome(), record.status.exit_code) == (status, outcome, code)
    assert record.verdict is not None and record.verdict.verdict == outcome and record.verdict.reason == raw[
        "verdict"]["reason"]
    assert record.verdict.traffic == raw["verdict"]["traffic"] and record.canary_brokers == raw["canary_brokers"]
    assert list(record.steps) == list(raw["steps"]) and all(s.status is StepStatus.DONE for s in record.steps.values())
    assert record.steps["preflight"].result == raw["steps"]["preflight"]["result"]
    assert record.window is not None and len(record.window.interim) == len(raw["window"]["interim"])
    assert record.before is not None and record.before.model_dump(mode="json") == raw["before"]
    assert record.spec == raw["spec"] and record.load_sizing == raw["load_sizing"]
    summary = record.summary("/runs/x", "/runs/x/report.html")
    assert (summary.outcome, summary.exit_code, summary.verdict) == (outcome, code, outcome)


def test_the_fail_fast_look_of_a_schema_1_window_is_a_look():
    record = load_record(_raw(ROLLED_BACK))
    assert record.window is not None and record.verdict is not None
    stopped = record.window.stopped_early
    assert isinstance(stopped, Look) and stopped.verdict == "ROLLBACK" and stopped.at_s == 46.1
    assert stopped.failed == ["baseline_produce_total_time_mean_ms"] == record.verdict.failed
    assert record.verdict.engine == "interim" and record.verdict.stopped_early and record.verdict.interim_looks == 3


@pytest.mark.parametrize("path", [PROMOTED, ROLLED_BACK])
def test_a_record_round_trips_through_its_serialized_form(path):
    record = load_record(_raw(path))
    written = record.to_json()
    assert written["schema"] == SCHEMA and written["kind"] == "broker"
    again = load_record(json.loads(json.dumps(written)))
    assert again.to_json() == written
    assert again.model_copy(update={"schema_version": record.schema_version}) == record
    # Only what the schema adds differs from what the earlier kafka-canary wrote: the steps, snapshot and spec not.
    raw = _raw(path)
    assert {k for k in raw if raw[k] != written[k]} <= {"schema", "window"}
    # a window without load leaves it out, as the windows of the kinds that have none
    assert written["window"] == {k: v for k, v in raw["window"].items() if k != "load" or v is not None}


def test_a_run_state_opens_a_schema_1_run_and_writes_it_back_in_this_schema(tmp_path):
    raw = _raw(PROMOTED)
    (tmp_path / "run.json").write_text(json.dumps(raw))
    state = RunState.open(tmp_path, raw["run_id"], raw["spec"])
    assert state.status is RunStatus.VERIFIED_PROMOTED and state.record.step_done("verify")
    state.update(load_sizing={"rate": 1.0})
    assert json.loads((tmp_path / "run.json").read_text())["schema"] == SCHEMA
    assert RunState.open(tmp_path, raw["run_id"], raw["spec"]).record.load_sizing == {"rate": 1.0}


def test_a_run_json_with_a_field_no_schema_has_is_refused_naming_it(tmp_path):
    raw = _raw(PROMOTED) | {"verdict": {"verdict": "MAYBE", "reason": "?"}}
    (tmp_path / "run.json").write_text(json.dumps(raw))
    with pytest.raises(RunStateError, match="is not a run of kafka-canary's schema 1 \\(verdict.verdict: "):
        RunState.open(tmp_path, raw["run_id"], raw["spec"])


@pytest.mark.parametrize("status, outcome, code", [
    (RunStatus.NEW, Outcome.UNFINISHED, 4),
    (RunStatus.PREFLIGHT, Outcome.UNFINISHED, 4),
    (RunStatus.LANE_OPEN, Outcome.UNFINISHED, 4),
    (RunStatus.CANARY_DEPLOYED, Outcome.UNFINISHED, 4),
    (RunStatus.JUDGED_PROMOTE, Outcome.UNFINISHED, 4),
    (RunStatus.JUDGED_ROLLBACK, Outcome.UNFINISHED, 4),
    (RunStatus.JUDGED_INCONCLUSIVE, Outcome.INCONCLUSIVE, 3),
    (RunStatus.PROMOTED, Outcome.UNFINISHED, 4),
    (RunStatus.ROLLED_BACK, Outcome.UNFINISHED, 4),
    (RunStatus.VERIFIED_PROMOTED, Outcome.PROMOTE, 0),
    (RunStatus.VERIFIED_ROLLED_BACK, Outcome.ROLLBACK, 1),
])
def test_the_status_alone_decides_the_outcome_and_the_exit_code(status, outcome, code):
    assert status.outcome() is outcome and status.exit_code == code == outcome.exit_code
    assert RunStatus(str(status)) is status  # what run.json keeps is the status


def test_the_status_knows_where_the_run_is():
    assert [s for s in RunStatus if s.finished] == [RunStatus.PROMOTED, RunStatus.ROLLED_BACK,
                                                    RunStatus.VERIFIED_PROMOTED, RunStatus.VERIFIED_ROLLED_BACK]
    assert [s for s in RunStatus if s.verified] == [RunStatus.VERIFIED_PROMOTED, RunStatus.VERIFIED_ROLLED_BACK]
    assert RunStatus.PROMOTED.as_verified() is RunStatus.VERIFIED_PROMOTED
    assert RunStatus.ROLLED_BACK.as_verified() is RunStatus.VERIFIED_ROLLED_BACK
    assert RunStatus.judged("INCONCLUSIVE") is RunStatus.JUDGED_INCONCLUSIVE
    with pytest.raises(ValueError, match="nothing to verify"):
        RunStatus.JUDGED_PROMOTE.as_verified()


def test_one_exit_code_map_and_every_code_its_own_outcome():
    assert dict(EXIT_CODES) == {Outcome.PROMOTE: 0, Outcome.ROLLBACK: 1, Outcome.ERROR: 2, Outcome.INCONCLUSIVE: 3,
                                Outcome.UNFINISHED: 4}
    assert [Outcome.of_exit_code(code) for code in range(6)] == [*EXIT_CODES, None]
    assert Brief(verdict="INCONCLUSIVE", reason="few buckets").outcome.exit_code == 3


def test_every_verdict_has_the_same_fields_and_only_its_kinds_details():
    failed = Verdict.failure("deploy-canary", "ssh: connect refused").to_dict()
    window = Window(attempt=1, start_ms=1, end_ms=2, interim=[Look(verdict="INCONCLUSIVE", reason="warm-up",
                                                                  observations=5, at_s=1.0)])
    judged = Verdict.of_window(Verdict(verdict="PROMOTE", reason="fine", engine="inline", analysis="analysis-1"),
                               window, observations=120).to_dict()
    assert failed == {"verdict": "ROLLBACK", "reason": "deploy-canary failed: ssh: connect refused", "failed": [],
                      "engine": None, "window_ms": None, "stopped_early": False, "interim_looks": 0, "analysis": None}
    assert judged == {"verdict": "PROMOTE", "reason": "fine", "failed": [], "engine": "inline", "window_ms": [1, 2],
                      "stopped_early": False, "interim_looks": 1, "analysis": "analysis-1", "observations": 120}
    assert Verdict.model_validate(judged) == Verdict.of_window(
        Verdict(verdict="PROMOTE", reason="fine", engine="inline", analysis="analysis-1"), window, observations=120)


# ----- the record's conditional write: two writers of one run.json keep each other's steps -----

def test_two_writers_keep_each_others_steps_and_fields(tmp_path):
    spec = {"change": {"config": {"a.b": "1"}}}
    mine = RunState.open(tmp_path, "r1", spec)
    theirs = RunState.open(tmp_path, "r1", spec)
    theirs.step_started("preflight")
    theirs.update(canary_brokers=[3], status=RunStatus.PREFLIGHT)
    mine.step_started("deploy-canary")  # loses the conditional write, merges, writes again
    mine.update(verdict=Verdict.failure("deploy-canary", "boom"), status=RunStatus.JUDGED_ROLLBACK)
    stored = RunState.open(tmp_path, "r1", spec).record
    assert list(stored.steps) == ["preflight", "deploy-canary"]
    assert stored.steps["preflight"].attempts == stored.steps["deploy-canary"].attempts == 1
    assert stored.canary_brokers == [3] and stored.status is RunStatus.JUDGED_ROLLBACK
    assert stored.verdict == Verdict.failure("deploy-canary", "boom")
    assert mine.record == stored


def test_a_cleared_field_is_a_change_the_merge_keeps(tmp_path):
    spec = {"change": {"config": {"a.b": "1"}}}
    mine = RunState.open(tmp_path, "r1", spec)
    mine.update(verdict=Verdict(verdict="INCONCLUSIVE", reason="few buckets"))
    theirs = RunState.open(tmp_path, "r1", spec)
    theirs.step_started("probe-window")
    mine.update(verdict=None)  # a new window clears the last verdict
    stored = RunState.open(tmp_path, "r1", spec).record
    assert stored.verdict is None and stored.step("probe-window") is not None


# ----- the command line: a run stopped by an error exits UNFINISHED, one by a verdict by its outcome -----

class _FakeRun:
    def __init__(self, run_dir: Path):
        from canary.rollout.core.audit import AuditLog

        self.spec = load_spec({"cluster": {"dir": str(run_dir.parent / "no-cluster")},
                               "change": {"version": "4.1.2"}, "canary": {"count": 1}, "run_id": "cli"})
        self.run_id = self.spec.effective_run_id
        self.state = RunState.open(run_dir, self.run_id, self.spec.to_dict())
        self.store, self.run_dir = self.state.store, self.state.run_dir
        self.audit = AuditLog(self.store, self.run_id)
        self.secret_values: list[str] = []
        self.step = "-"

    def say(self, *args) -> None:
        pass

    def write_report(self) -> Path:
        return write_report(self.state, self.audit)


def _kind(run_dir: Path, failing: str | None, verdict: str = "PROMOTE"):
    def step(name: str):
        def run(rollout, **_):
            if name == failing:
                raise RolloutError(f"{name}: the cluster lock is held by rollout other-1")
            if name == "judge":
                rollout.state.update(verdict=Verdict(verdict=verdict, reason="fake"), status=RunStatus.judged(verdict))
                return rollout.state.verdict.to_dict()
            if name in ("promote", "rollback"):
                rollout.state.update(status=RunStatus.PROMOTED if name == "promote" else RunStatus.ROLLED_BACK)
            if name == "verify":
                rollout.state.update(status=rollout.state.status.as_verified())
            return {}
        return run

    return with_fake_steps(BROKER, step, load_spec=lambda source, environ: None,
                           open_run=lambda spec, where: _FakeRun(run_dir))


def _args(kind) -> argparse.Namespace:
    return argparse.Namespace(kind=kind, spec="rollout.yaml", run_dir=None, json=True, approve=False,
                              on_inconclusive="stop")


def test_rollout_run_exits_unfinished_when_a_step_stops_the_run(tmp_path, capsys):
    with pytest.raises(RunUnfinished) as stopped:
        cmd_run(_args(_kind(tmp_path / "run", failing="preflight")))
    assert stopped.value.exit_code == Outcome.UNFINISHED.exit_code == 4
    assert str(stopped.value).startswith("preflight: the cluster lock is held by rollout other-1")
    assert str(stopped.value).endswith("(rollout cli stopped unfinished at 'new')")
    assert RunState.open(tmp_path / "run", "cli", _FakeRun(tmp_path / "x").spec.to_dict()).status.outcome() is (
        Outcome.UNFINISHED)


@pytest.mark.parametrize("verdict, code, status", [("PROMOTE", 0, "verified promoted"),
                                                   ("ROLLBACK", 1, "verified rolled_back"),
                                                   ("INCONCLUSIVE", 3, "judged INCONCLUSIVE")])
def test_rollout_run_exits_by_the_runs_outcome(tmp_path, capsys, verdict, code, status):
    assert cmd_run(_args(_kind(tmp_path / "run", failing=None, verdict=verdict))) == code
    printed = json.loads(capsys.readouterr().out)
    assert (printed["exit_code"], printed["status"], printed["verdict"]) == (code, status, verdict)
    assert printed["outcome"] == Outcome.of_exit_code(code)
