"""Once a run decided ROLLBACK it only goes back: resuming it (`rollout run` again, a per-step command, an Airflow task)
never deploys, judges or promotes again, only finishes the rollback; and a rollback that fails says which brokers are
not back, that the lock is still held and what to do. The broker kind's steps with fakes, no cluster."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from canary.judge import PROMOTE, ROLLBACK
from canary.outcome import Outcome
from canary.rollout.broker import BROKER, Rollout
from canary.rollout.broker.desired import not_back
from canary.rollout.broker.record import BrokerRunRecord
from canary.rollout.broker.spec import load_spec
from canary.rollout.core import RolloutError, RolloutKind, RolloutRun, RunStatus, Verdict, run_all
from canary.rollout.core.audit import AuditLog
from canary.rollout.core.engine import roll_back
from canary.rollout.core.run import RunState
from canary.rollout.deployers.base import BrokerInfo, ControllerInfo

from ..fake_steps import with_fake_steps

BEFORE = {"brokers": {str(i): {"id": i, "version": "3.9.2", "config": {"num.io.threads": "4"}, "rack": None}
                      for i in (1, 2, 3)},
          "controllers": {"3000": {"id": 3000, "version": "3.9.2"}}, "features": {}}


class FakeDeployer:
    """The brokers as a deployer describes them: broker 3 the canary, stopped when `stopped`."""

    def __init__(self) -> None:
        self.stopped = {3}
        self.version = {1: "3.9.2", 2: "3.9.2", 3: "4.1.2"}

    def brokers(self) -> list[BrokerInfo]:
        return [BrokerInfo(i, self.version[i], {"num.io.threads": "4" if i != 2 else "6"}, None, i not in self.stopped)
                for i in (1, 2, 3)]

    def controllers(self) -> list[ControllerInfo]:
        return [ControllerInfo(3000, "3.9.2", True)]


class FakeRun:
    """A broker rollout's run with the real spec, run state and audit log, and a fake deployer."""

    def __init__(self, run_dir: Path):
        self.spec = load_spec({"cluster": {"dir": str(run_dir.parent / "no-cluster")},
                               "change": {"version": "4.1.2"}, "canary": {"count": 1}, "run_id": "resumed"})
        self.run_id = self.spec.effective_run_id
        self.state = RunState.open(run_dir, self.run_id, self.spec.to_dict(), record=BrokerRunRecord)
        self.store = self.state.store
        self.run_dir = self.state.run_dir
        self.audit = AuditLog(self.store, self.run_id)
        self.deployer = FakeDeployer()
        self.secret_values: list[str] = []
        self.step = "-"
        self.calls: list[str] = []

    relative = RolloutRun.relative
    local = RolloutRun.local
    record = Rollout.record
    snapshot = Rollout.snapshot
    write_report = Rollout.write_report

    def say(self, text: str, *args) -> None:
        pass


def fake_kind(broken: set[str], error: type[Exception] = RolloutError) -> RolloutKind:
    """The broker kind with each step replaced by one that records its call, and fails (raising `error`) while named
    in `broken`; its judge would say PROMOTE."""

    def fake(name: str):
        def step(run, **_):
            run.calls.append(name)
            if name in broken:
                raise error(f"{name}: ssh: connect to host k3 port 22: Connection refused")
            if name == "preflight":
                run.state.update(before=BEFORE, canary_brokers=[3])
            if name == "judge":
                run.state.update(verdict=Verdict(verdict=PROMOTE, reason="no regression"),
                                 status=RunStatus.JUDGED_PROMOTE)
                return {"verdict": PROMOTE}
            if name in ("promote", "rollback"):
                run.state.update(status=RunStatus.PROMOTED if name == "promote" else RunStatus.ROLLED_BACK)
            if name == "verify":
                run.state.update(status=run.state.status.as_verified())
            return {}
        return step

    return with_fake_steps(BROKER, fake)


def failed_run(tmp_path: Path) -> tuple[FakeRun, str]:
    """The issue's run: the canary roll cut off (deploy-canary failed), the rollback failed too, broker 3 stopped.
    Returns the run and the error `run_all` ended with."""
    run = FakeRun(tmp_path / "run")
    with pytest.raises(RolloutError) as failed:
        run_all(fake_kind({"deploy-canary", "rollback"}), run)
    assert run.calls == ["preflight", "deploy-canary", "rollback"]
    assert run.state.verdict is not None and run.state.verdict.verdict == ROLLBACK
    assert run.state.status is RunStatus.JUDGED_ROLLBACK and run.state.status.outcome() is Outcome.UNFINISHED
    return run, str(failed.value)


def test_a_failed_rollback_says_what_is_not_back_that_the_lock_is_held_and_what_to_do(tmp_path):
    _, message = failed_run(tmp_path)
    assert "\n" not in message
    assert message.startswith("rollback of rollout resumed failed: rollback: ssh: connect to host k3")
    assert ("not back as before the rollout: broker 2 differs from before: config num.io.threads; broker 3 is "
            "stopped") in message
    assert "the cluster lock is still held by this rollout" in message
    assert "run `kafka-canary rollout run` (or `kafka-canary rollout rollback`" in message
    assert message.index("to finish the rollback") < message.index("kafka-canary rollout unlock --spec FILE --force")


def test_resuming_after_a_failed_rollback_only_finishes_the_rollback(tmp_path):
    first, _ = failed_run(tmp_path)
    resumed = FakeRun(tmp_path / "run")  # the same run directory; deploy-canary would work now, judge say PROMOTE
    result = run_all(fake_kind(set()), resumed, approve=True)
    assert resumed.calls == ["rollback", "verify"]
    assert (result.outcome, result.verdict, result.exit_code) == (Outcome.ROLLBACK, ROLLBACK, 1)
    assert first.state.verdict is not None and result.reason == first.state.verdict.reason
    steps = resumed.state.record.steps
    assert steps["deploy-canary"].status == "failed" and steps["deploy-canary"].attempts == 1
    assert "judge" not in steps and "promote" not in steps
    assert [steps["rollback"].attempts, steps["rollback"].status] == [2, "done"]
    again = FakeRun(tmp_path / "run")  # finished: nothing runs again
    assert run_all(fake_kind(set()), again).outcome is Outcome.ROLLBACK and again.calls == []


def test_resuming_when_the_rollback_fails_again_says_so_again(tmp_path):
    failed_run(tmp_path)
    resumed = FakeRun(tmp_path / "run")
    resumed.deployer.stopped = set()
    with pytest.raises(RolloutError, match="not back as before the rollout: broker 2 differs from before: config "
                                           "num.io.threads; broker 3 differs from before: version 4.1.2"):
        run_all(fake_kind({"rollback"}), resumed)
    assert resumed.calls == ["rollback"]


@pytest.mark.parametrize("name", ["preflight", "deploy-canary", "warm-up", "lead", "probe-window", "promote"])
def test_a_step_towards_the_change_is_refused_once_rollback_was_decided(tmp_path, name):
    """`kafka-canary rollout <step>` and the Airflow operators call the kind's steps one at a time."""
    failed_run(tmp_path)
    run = FakeRun(tmp_path / "run")
    kind = fake_kind(set())
    before = json.loads((tmp_path / "run" / "run.json").read_text())
    with pytest.raises(RolloutError, match=f"decided ROLLBACK \\(deploy-canary failed: deploy-canary: ssh: .*\\), so "
                                           f"{name} may not run: the run can only finish its rollback"):
        kind.step(name)(run, **({"approve": True} if name == "promote" else {}))
    assert run.calls == []
    after = json.loads((tmp_path / "run" / "run.json").read_text())
    assert after["steps"] == before["steps"] and after["verdict"] == before["verdict"]
    assert run.audit.entries()[-1]["action"] == "step refused"


@pytest.mark.parametrize("name", ["judge", "gate"])
def test_the_gate_repeats_the_rollback_verdict_instead_of_judging_again(tmp_path, name):
    first, _ = failed_run(tmp_path)
    run = FakeRun(tmp_path / "run")
    verdict = fake_kind(set()).step(name)(run)
    assert first.state.verdict is not None and verdict == first.state.verdict.to_dict() and run.calls == []
    assert run.state.verdict == first.state.verdict and run.state.status is RunStatus.JUDGED_ROLLBACK


def test_rollback_and_verify_finish_the_run_one_step_at_a_time(tmp_path):
    failed_run(tmp_path)
    run = FakeRun(tmp_path / "run")
    kind = fake_kind(set())
    roll_back(kind, run)
    kind.verify(run)
    assert run.calls == ["rollback", "verify"] and run.state.status is RunStatus.VERIFIED_ROLLED_BACK


def test_a_rollback_whose_nodes_cannot_be_described_still_says_the_lock_is_held(tmp_path):
    failed_run(tmp_path)
    run = FakeRun(tmp_path / "run")

    def unreachable():
        raise RolloutError("describe of broker 3 failed: ssh: connect to host k3 port 22: Connection refused")

    run.deployer.brokers = unreachable
    with pytest.raises(RolloutError) as failed:
        roll_back(fake_kind({"rollback"}), run)
    assert "what the nodes are now is unknown: describing them failed too (describe of broker 3 failed" in str(
        failed.value)
    assert "the cluster lock is still held" in str(failed.value)


def test_not_back_names_what_differs_from_the_snapshot(tmp_path):
    run = FakeRun(tmp_path / "run")
    run.state.update(before=BEFORE, canary_brokers=[3])
    assert not_back(run) == ["broker 2 differs from before: config num.io.threads", "broker 3 is stopped"]
    run.deployer.stopped = set()
    run.deployer.version[2] = "4.1.2"
    assert not_back(run)[0] == "broker 2 differs from before: version 4.1.2 (before 3.9.2), config num.io.threads"


def test_every_kind_lets_only_its_rollback_and_verify_run_after_a_rollback():
    from canary.rollout.client import CLIENT

    for kind in (BROKER, CLIENT):
        assert [s.name for s in kind.all_steps if s.after_rollback] == ["rollback", "verify"], kind.name
    with pytest.raises(ValueError, match="rollback and verify steps must be after_rollback"):
        dataclasses.replace(BROKER, verify=dataclasses.replace(BROKER.verify, after_rollback=False))
