"""The fault suite (issue 8): faults injected into real rollouts on real brokers, and the analysis failing at the
engine boundary.

Each scenario (tests/reliability/fault_scenarios.py, shared with bench/fault_bench.py) must end in a safe state —
verified rolled back, verified promoted, or refused before any change — with no acknowledged message lost (the
rollout's own probe observations and an independent produce-consume-validate stream), no broker restart the guard
should have refused (seen from outside the rollout), and no broker restarted more often than the change needs.

The scenarios share one cluster of 3 brokers and 3 controllers (each leaves it healthy; `healed` checks that
before the next). A rollout takes minutes on a 2-core machine, so the real-broker scenarios are marked slow;
`make test` runs them all.
"""

from __future__ import annotations

import dataclasses
import json
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import running_cluster

from canary.cluster.local import LocalCluster
from canary.errors import CanaryError
from canary.judge import INCONCLUSIVE, PROMOTE, ROLLBACK
from canary.kafka.wait import wait_until
from canary.rollout.broker import BROKER, Rollout
from canary.rollout.broker.record import BrokerRunRecord
from canary.rollout.broker.spec import load_spec
from canary.rollout.core import RolloutKind, RunStatus, Step, run_all
from canary.rollout.core.audit import AuditLog
from canary.rollout.core.rollout import RolloutRun
from canary.rollout.core.run import RunState

from . import fault_scenarios as fs

BROKERS = (1, 2, 3)


@pytest.fixture(scope="module")
def fault_cluster() -> Iterator[LocalCluster]:
    """3 brokers and 3 controllers (a quorum whose leader can be restarted), shared by every scenario."""
    with running_cluster("faults", brokers=3, controllers=3) as cluster:
        yield cluster


@pytest.fixture
def healed(fault_cluster) -> LocalCluster:
    """The shared cluster healthy and unlocked. Damage a scenario leaves fails that scenario's own assertions; it is
    repaired here so the next scenario still runs."""
    fixed = fs.heal(fault_cluster)
    if fixed:
        warnings.warn(f"the scenario before left the cluster damaged: {fixed}", stacklevel=1)
    return fault_cluster


def assert_safe(result: fs.Result) -> None:
    """The three promises of every scenario, and the broker starts the change needs."""
    assert result.safe, f"not in a safe state: {result.status}; errors {result.errors}; see {result.run_dir}"
    assert result.validated["acked"] > 0 and result.validated["lost"] == 0, result.validated
    assert result.probe["acked"] > 0, result.probe
    assert result.probe["lost"] == 0 and result.probe["unaccounted"] == 0, result.probe
    assert result.guard_violations == [], result.guard_violations
    starts = {b: result.starts.get(b, 0) for b in BROKERS}
    assert starts == {b: result.expected_starts.get(b, 0) for b in BROKERS}, (starts, result.restarts)
    if result.status == "verified rolled_back":
        assert result.unchanged, "rolled back and verified, but the nodes differ from before the rollout"


def audit(result: fs.Result) -> list[dict]:
    return fs.audit_of(Path(result.run_dir))


# ----- real brokers -----

@pytest.mark.integration
@pytest.mark.slow
def test_a_baseline_broker_killed_in_the_probe_window(healed, tmp_path):
    result = fs.probe_window_kill(healed, tmp_path)
    assert result.fault_ms, result.errors
    assert result.verdict in (ROLLBACK, INCONCLUSIVE), result.verdict
    assert result.status == "verified rolled_back", (result.status, result.errors)
    assert_safe(result)
    # Nobody else restarted the killed broker: the rollback started it (first, since the guard waits for it).
    rollback = [e["broker"] for e in audit(result) if e["step"] == "rollback" and e["action"] == "restart broker"]
    assert rollback[0] == 1 and 3 in rollback, rollback


@pytest.mark.integration
@pytest.mark.slow
def test_b_broker_killed_during_deploy_holds_the_next_canary(healed, tmp_path):
    result = fs.deploy_kill(healed, tmp_path)
    assert result.fault_ms, result.errors
    assert result.status == "verified rolled_back", (result.status, result.errors)
    assert_safe(result)
    # The guard held the second canary while broker 1 was down; it was never restarted.
    refused = [w for w in result.guard_waits if w["action"] == "guard refused"]
    assert refused and refused[0]["broker"] == 3 and refused[0]["step"] == "deploy-canary", result.guard_waits
    assert result.restarts.get(3, 0) == 0, result.restarts
    assert result.verdict == ROLLBACK


@pytest.mark.integration
@pytest.mark.slow
def test_c_broker_killed_during_promote_still_ends_promoted(healed, tmp_path):
    result = fs.promote_kill(healed, tmp_path)
    assert result.fault_ms, f"promote never reached broker 2: verdict {result.verdict}, errors {result.errors}"
    assert result.status == "verified promoted", (result.status, result.errors)
    assert_safe(result)
    healed.reload()
    assert {n.config.get("num.io.threads") for n in healed.state.brokers} == {"7"}


@pytest.mark.integration
@pytest.mark.slow
def test_d_each_step_killed_and_rerun_converges_without_repeating_a_change(healed, tmp_path):
    result = fs.step_kills(healed, tmp_path)
    assert result.status.startswith("verified"), (result.status, result.errors, result.kills)
    assert_safe(result)
    for kill in result.kills:
        assert kill["killed"] and kill["attempts"] >= 2, kill
    mid = {k["step"]: k["mid_step"] for k in result.kills}
    # The steps that change the cluster or run for long were killed inside the step, not after it.
    for step in ("preflight", "deploy-canary", "probe-window", "verify"):
        assert mid[step], result.kills
    assert mid.get("promote", mid.get("rollback")), result.kills
    retried = {e["step"] for e in audit(result) if e["action"] == "step started" and e["attempt"] == 2}
    assert retried == {k["step"] for k in result.kills}


@pytest.mark.integration
@pytest.mark.slow
def test_e_controller_quorum_leader_restarted_mid_rollout(healed, tmp_path):
    result = fs.controller_restart(healed, tmp_path)
    assert result.fault_ms, result.errors
    assert result.status.startswith("verified"), (result.status, result.errors)
    assert_safe(result)


@pytest.mark.integration
@pytest.mark.slow
def test_f_analysis_timing_out_never_promotes(healed, tmp_path):
    result = fs.analysis_timeout(healed, tmp_path)
    assert result.fault_ms, "the analysis never ran"
    assert result.verdict == INCONCLUSIVE, result.verdict
    reason = json.loads((Path(result.run_dir) / "run.json").read_text())["verdict"]["reason"]
    assert "Spark analysis failed" in reason, reason
    assert result.status == "verified rolled_back", (result.status, result.errors)
    assert_safe(result)


@pytest.mark.integration
@pytest.mark.slow
def test_g_airflow_task_killed_mid_deploy_and_retried(healed, tmp_path):
    result = fs.airflow_task_kill(healed, tmp_path)
    assert result.kills and result.kills[0]["mid_step"], (result.errors, result.kills)
    assert result.status.startswith("verified"), (result.status, result.errors)
    assert_safe(result)
    assert result.attempts["deploy-canary"] >= 2, result.attempts


# ----- the engine boundary, no cluster -----

class Offline:
    """A rollout whose cluster is never reached: the real spec, run state and audit log, for the steps that only
    read the run directory (the judge) and for the engine with its cluster steps replaced."""

    def __init__(self, tmp_path: Path, engine_name: str = "inline"):
        self.spec = load_spec({"cluster": {"dir": str(tmp_path / "no-cluster")}, "change": {"config": {"a.b": "1"}},
                               "canary": {"count": 1}, "judge": {"engine": engine_name}, "run_id": "offline"})
        self.run_id = self.spec.effective_run_id
        self.run_dir = tmp_path / "run"
        self.state = RunState.open(self.run_dir, self.run_id, self.spec.to_dict(), record=BrokerRunRecord)
        self.store = self.state.store
        self.audit = AuditLog(self.store, self.run_id)
        self.bootstrap_servers = "127.0.0.1:9"
        self.secret_values: list[str] = []
        self.step = "-"
        self.calls: list[str] = []

    relative = RolloutRun.relative
    local = RolloutRun.local
    record = Rollout.record
    snapshot = Rollout.snapshot
    write_report = Rollout.write_report
    judge_config = Rollout.judge_config
    control_ids = Rollout.control_ids

    def say(self, text: str, *args) -> None:
        pass

    def progress(self, line: str) -> None:
        pass

    def window(self) -> None:
        """A finished probe window whose observations the judge reads."""
        observations = self.run_dir / "observations-window-1.jsonl"
        observations.write_text("")
        self.state.update(window={"attempt": 1, "probe_run_id": "offline-window-1", "start_ms": 1, "end_ms": 2,
                                  "observations": str(observations), "stopped_early": None, "interim": [],
                                  "probe": {}})


def _fake_kind(**real) -> RolloutKind:
    """The broker kind with every cluster step replaced by one that records its call (the canary counts as
    deployed); `real`: functions for steps by name (`judge=broken`), the judge otherwise stays the real one."""
    def fake(name: str, effect=None):
        def step(rollout, **kwargs):
            rollout.calls.append(name)
            if effect:
                effect(rollout)
            return {}
        return step

    runs = {"preflight": fake("preflight", lambda x: x.state.update(before={"brokers": {}})),
            "deploy-canary": fake("deploy-canary"), "warm-up": fake("warm-up"), "lead": fake("lead"),
            "probe-window": fake("probe-window", lambda x: x.window()),
            "promote": fake("promote", lambda x: x.state.update(status=RunStatus.PROMOTED)),
            "rollback": fake("rollback", lambda x: x.state.update(status=RunStatus.ROLLED_BACK)),
            "verify": fake("verify", lambda x: x.state.update(status=x.state.status.as_verified()))} | real

    def swapped(step: Step) -> Step:
        return dataclasses.replace(step, run=runs[step.name]) if step.name in runs else step
    return dataclasses.replace(BROKER, steps=tuple(swapped(s) for s in BROKER.steps), promote=swapped(BROKER.promote),
                               rollback=swapped(BROKER.rollback), verify=swapped(BROKER.verify))


def test_a_crashing_judge_after_the_canary_was_deployed_rolls_back(monkeypatch, tmp_path):
    r = Offline(tmp_path)

    def broken(*args, **kwargs):
        raise ZeroDivisionError("float division by zero")  # a bug in the judge, not a CanaryError

    result = run_all(_fake_kind(judge=broken), r)
    assert r.calls[-2:] == ["rollback", "verify"], r.calls
    assert result.outcome == ROLLBACK and result.verdict == ROLLBACK
    assert "judge failed: float division by zero" in result.reason
    assert r.state.record.steps["judge"].status == "failed"


def test_an_admin_call_timing_out_while_waiting_is_waited_through():
    """Found on real brokers: describe_cluster's future timed out (TimeoutError, no message) right after a broker
    was killed, and the deploy step failed with an empty error instead of waiting on."""
    calls = []

    def check():
        calls.append(1)
        if len(calls) == 1:
            raise TimeoutError()
        return None

    assert wait_until("broker 2 registration", 5, check, poll=0.01) >= 0 and len(calls) == 2


def test_a_failure_without_a_message_is_named_by_its_type(monkeypatch, tmp_path):
    r = Offline(tmp_path)

    def timed_out(*args, **kwargs):
        raise TimeoutError()

    result = run_all(_fake_kind(judge=timed_out), r)
    assert result.reason == "judge failed: TimeoutError"
    assert r.state.record.steps["judge"].error == "TimeoutError"


@pytest.mark.parametrize("analysis", ["exit 2", "exit 1 without a verdict", "raises"])
def test_a_failed_spark_analysis_is_inconclusive(monkeypatch, tmp_path, analysis):
    from canary import analysis as library
    from canary.analysis.result import AnalysisResult

    r = Offline(tmp_path, engine_name="spark")
    r.window()

    def analyze(request, **kwargs):
        if analysis == "raises":
            raise library.SparkSubmitError("cannot run spark-submit: No such file or directory")
        return AnalysisResult.from_job("spark", 2 if analysis == "exit 2" else 1, request.out)

    monkeypatch.setattr(library, "analyze", analyze)
    verdict = BROKER.step("judge")(r)
    assert verdict["verdict"] == INCONCLUSIVE, verdict
    assert "Spark analysis failed" in verdict["reason"]
    assert r.state.status is RunStatus.JUDGED_INCONCLUSIVE


def test_a_failed_analysis_is_never_promoted_by_the_engine(monkeypatch, tmp_path):
    """The whole engine with a failing analysis: the verdict is INCONCLUSIVE and, unapproved, rolled back."""
    from canary import analysis
    from canary.analysis.result import AnalysisResult

    r = Offline(tmp_path, engine_name="spark")
    monkeypatch.setattr(analysis, "analyze", lambda request, **k: AnalysisResult.from_job("spark", 2, request.out))
    result = run_all(_fake_kind(), r)
    assert "promote" not in r.calls and r.calls[-2:] == ["rollback", "verify"], r.calls
    assert result.verdict == INCONCLUSIVE and result.outcome != PROMOTE


def test_an_error_before_any_change_is_raised_and_nothing_is_rolled_back(monkeypatch, tmp_path):
    r = Offline(tmp_path)

    def refused(rollout):
        raise CanaryError("the cluster is not healthy")

    with pytest.raises(CanaryError, match="not healthy"):
        run_all(_fake_kind(preflight=refused), r)
    assert r.calls == []


# ----- the suite's own checks can fail -----

def test_probe_accounting_names_a_lost_and_an_unaccounted_message(tmp_path):
    def obs(message_id, outcome, ack_ts=10):
        return json.dumps({"topic": "__kafka_canary", "partition": 0, "message_id": message_id, "outcome": outcome,
                           "ack_ts": ack_ts, "error": None})

    (tmp_path / "observations-deploy.jsonl").write_text("\n".join([
        obs("m1", "delivered"), obs("m2", "lost"), obs("m2", "duplicate"), obs("m3", "produce_error", None)]))
    entries = [{"run_id": "r", "step": "deploy-canary", "action": "probe during the rolls", "probe_run_id": "r-deploy",
                "acked": 3}]
    seen = fs.probe_accounting(tmp_path, entries)
    assert (seen["acked"], seen["lost"], seen["unaccounted"]) == (2, 1, 1), seen
    assert "m2 lost" in seen["lost_examples"][0]


def test_watch_flags_a_restart_while_another_broker_is_down():
    from canary.rollout.guard import PartitionView

    watch = fs.Watch.__new__(fs.Watch)
    full = [PartitionView("t", 0, (1, 2, 3), (1, 2, 3), 1, 2)]
    watch.samples = [(1000, full, {1: 11, 2: 12, 3: 13}), (2000, full, {1: None, 2: 12, 3: 13}),
                     (3000, full, {1: None, 2: 12, 3: 14}), (4000, full, {1: 15, 2: 12, 3: 14})]
    restart = {"step": "deploy-canary", "action": "restart broker"}
    assert watch.violations([restart | {"broker": 3, "ts_ms": 1500}]) == []
    assert watch.violations([restart | {"broker": 1, "ts_ms": 2500}]) == []  # starting the broker that is down
    assert "while broker(s) [1] were down" in watch.violations([restart | {"broker": 3, "ts_ms": 2500}])[0]
    refused = {"step": "deploy-canary", "action": "guard refused", "broker": 3, "ts_ms": 1200}
    assert "after the guard refused it" in watch.violations([refused, restart | {"broker": 3, "ts_ms": 1500}])[0]
    again = {"step": "deploy-canary", "action": "step started", "ts_ms": 1300}
    assert watch.violations([refused, again, restart | {"broker": 3, "ts_ms": 1500}]) == []  # a new attempt
    assert watch.starts() == {1: 1, 2: 0, 3: 1}

