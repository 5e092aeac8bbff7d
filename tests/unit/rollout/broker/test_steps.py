"""The broker rollout's steps on a cluster in memory (tests/unit/rollout/fake_cluster.py): what each step changes,
in which order, what it refuses before any change, and that running it again changes nothing more. The same steps
run on real brokers in tests/integration/test_rollout.py and the fault suite."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from canary.judge import PROMOTE
from canary.kafka.wait import WaitTimeout
from canary.lanes import canary_rack
from canary.rollout.broker import config_check, deploy, finalize, preflight, promote, rollback, verify
from canary.rollout.broker.preflight import snapshot
from canary.rollout.broker.probes import probe_config, window_leaders
from canary.rollout.broker.rolling import GuardRefused, roll_controllers
from canary.rollout.broker.rollout import PROBE_TOPIC, Rollout
from canary.rollout.broker.spec import load_spec
from canary.rollout.core import Look, RolloutError, RunStatus, Verdict, pause

from ..fake_cluster import FakeCluster, FakeProbes, VirtualClock

BASE = {"num.io.threads": "8"}
CHANGE = {"num.io.threads": "6"}


@pytest.fixture(autouse=True)
def clock(monkeypatch) -> VirtualClock:
    return VirtualClock(monkeypatch)


@pytest.fixture
def cluster() -> FakeCluster:
    """Three brokers; the probe's topic and a user topic, each partition's replicas on all three."""
    return FakeCluster.of(topics={PROBE_TOPIC: 3, "orders": 6}, config=BASE)


class Lock:
    def __init__(self) -> None:
        self.held: str | None = None

    def acquire(self, run_id: str, brokers: int) -> bool:
        taken, self.held = self.held is None, run_id
        return taken

    def release(self, run_id: str) -> bool:
        held, self.held = self.held == run_id, None
        return held


def run_on(cluster: FakeCluster, tmp_path: Path, probes: FakeProbes | None = None, **spec) -> Rollout:
    """A broker rollout of CHANGE on `cluster`: broker 3 the canary, broker 2 its control, broker metrics off."""
    raw = {"cluster": {"dir": str(tmp_path / "no-cluster")}, "change": {"config": CHANGE},
           "canary": {"brokers": [3], "control": [2]}, "broker_metrics": {"enabled": False},
           "timeouts": {"guard": "0s", "warm_up": "30s"}, "run_id": "unit"} | spec
    run = Rollout(load_spec(raw), tmp_path / "run", deployer=cluster, admin=cluster, probe=probes or FakeProbes())
    run.lock = Lock()  # type: ignore[assignment]
    return run


def preflighted(cluster: FakeCluster, tmp_path: Path, **spec) -> Rollout:
    """A run as preflight leaves it: canary and control chosen, the snapshot taken."""
    run = run_on(cluster, tmp_path, **spec)
    run.state.update(canary_brokers=[3], control_brokers=[2], before=snapshot(run), status=RunStatus.PREFLIGHT)
    return run


def deployed(cluster: FakeCluster, tmp_path: Path, **spec) -> Rollout:
    run = preflighted(cluster, tmp_path, **spec)
    run.step = "deploy-canary"
    deploy.deploy_canary(run)
    return run


# ----- preflight: refused before any change -----

@pytest.mark.parametrize("trouble, message", [
    (lambda c: c.parts[("orders", 0)].isr.remove(2), r"the cluster is not healthy: .*orders-0"),
    (lambda c: c.moving.append(("orders", 4)), r"partition reassignments are in flight \(\['orders-4'\]\)"),
    (lambda c: c.refused.update({"num.io.threads": "Invalid value 6"}),
     r"change.config has values a Kafka 3.9.2 broker refuses \(num.io.threads: Invalid value 6\)"),
], ids=["under-replicated", "reassigning", "config-refused"])
def test_preflight_refuses_before_any_change_and_leaves_the_lock_free(cluster, tmp_path, monkeypatch, trouble,
                                                                     message):
    monkeypatch.setattr(config_check, "definition_check", lambda version, values: None)  # the broker checks
    trouble(cluster)
    run = run_on(cluster, tmp_path)
    with pytest.raises(RolloutError, match=message):
        preflight.preflight(run)
    assert cluster.changes == [] and run.lock.held is None and run.state.before is None  # type: ignore[attr-defined]


def test_preflight_refuses_lead_topics_the_cluster_does_not_have(cluster, tmp_path, monkeypatch):
    monkeypatch.setattr(config_check, "definition_check", lambda version, values: None)
    with pytest.raises(RolloutError, match=r"lead_topics \['payments'\] do not exist on the cluster"):
        preflight.preflight(run_on(cluster, tmp_path, lead_topics=["orders", "payments"]))


def test_the_snapshot_holds_every_broker_the_features_and_the_leaders(cluster, tmp_path):
    before = snapshot(run_on(cluster, tmp_path))
    assert before.broker(3).model_dump() == {"id": 3, "version": "3.9.2", "config": BASE, "rack": None,
                                             "client_delay_ms": 0.0}
    assert before.features == {"metadata.version": 21} and before.controller(3000).version == "3.9.2"
    assert before.leader_map()["orders-2"] == {"leader": 3, "preferred": 3}


# ----- deploy-canary, warm-up, lead -----

def test_deploy_canary_rolls_the_canary_to_the_change_then_restarts_the_control_as_it_is(cluster, tmp_path):
    run = deployed(cluster, tmp_path)
    assert [c[:5] for c in cluster.changes] == [("roll", 3, "3.9.2", CHANGE, canary_rack(None)),
                                                ("roll", 2, "3.9.2", BASE, None)]
    assert run.state.status is RunStatus.CANARY_DEPLOYED and run.state.record.control_restarted == [2]
    assert run.open_probe.opened == ["unit-deploy"]  # type: ignore[attr-defined]  # watched every roll


def test_deploy_canary_run_again_restarts_nothing(cluster, tmp_path):
    run = deployed(cluster, tmp_path)
    deploy.deploy_canary(run)
    assert cluster.rolls() == [3, 2]


def test_the_guard_refuses_a_canary_whose_partition_would_drop_below_min_isr(cluster, tmp_path):
    cluster.parts[("orders", 2)].isr = [3, 1]  # broker 2 out of the ISR: without 3, one replica for min ISR 2
    run = preflighted(cluster, tmp_path)
    run.step = "deploy-canary"
    with pytest.raises(GuardRefused, match=r"broker 3 may not restart: .*orders-2.*The broker was not restarted"):
        deploy.deploy_canary(run)
    assert cluster.rolls() == []
    assert "guard refused" in [e["action"] for e in run.audit.entries()]


def test_the_control_restarts_once_the_canary_is_back_in_the_isr_and_warm_up_waits_for_both(tmp_path, clock):
    cluster = FakeCluster.of(topics={PROBE_TOPIC: 3, "orders": 6}, config=BASE, catch_up=4)
    started = clock.now
    run = deployed(cluster, tmp_path, timeouts={"guard": "60s", "warm_up": "30s"})
    assert cluster.rolls() == [3, 2] and clock.now - started >= 3  # the guard waited for the canary's catch-up
    assert 2 in cluster.behind
    waited = deploy.warm_up(run)["waited_s"]
    assert set(waited) == {"3", "2"} and waited["2"] > 0
    assert all(set(p.isr) == set(p.replicas) for p in cluster.parts.values())


def test_warm_up_gives_up_naming_the_partitions_a_broker_is_not_back_in(cluster, tmp_path):
    run = deployed(cluster, tmp_path)
    for p in cluster.parts.values():
        p.isr.remove(3)
    cluster.behind[3] = 10**6
    with pytest.raises(WaitTimeout, match=r"learner warm-up of broker 3: not done after 30s: broker 3 not yet in "
                                           r"the ISR of 9 partition\(s\)"):
        deploy.warm_up(run)


def test_lead_gives_canary_and_control_their_preferred_partitions_of_every_topic(cluster, tmp_path):
    run = deployed(cluster, tmp_path)
    # A restarted broker gives up its leadership: the canary's preferred partitions went to others, the control's
    # to the next in their ISR (the canary among them).
    assert cluster.led_by(2) == [] and not {f"{PROBE_TOPIC}-2", "orders-2", "orders-5"} & set(cluster.led_by(3))
    result = deploy.lead(run)
    assert cluster.led_by(3) == [f"{PROBE_TOPIC}-2", "orders-2", "orders-5"]
    assert cluster.led_by(2) == [f"{PROBE_TOPIC}-1", "orders-1", "orders-4"]
    assert result["canary_partitions"] == 3 and result["topics_led"] == [PROBE_TOPIC, "orders"]
    assert result["traffic_share"]["reason"] == "broker metrics are off"


def test_the_window_probes_the_canary_and_its_control_alone_and_without_a_control_every_partition(cluster,
                                                                                                   tmp_path):
    run = preflighted(cluster, tmp_path)
    assert probe_config(run, "window-1", leaders=window_leaders(run)).leaders == (2, 3)
    run = run_on(cluster, tmp_path)
    run.state.update(canary_brokers=[3], control_brokers=[])
    assert window_leaders(run) == () and probe_config(run, "window-1").leaders == ()


def test_lead_with_lead_topics_none_leads_the_probe_s_partitions_alone(cluster, tmp_path):
    run = deployed(cluster, tmp_path, lead_topics="none")
    deploy.lead(run)
    assert cluster.led_by(3, PROBE_TOPIC) == [f"{PROBE_TOPIC}-2"]
    assert not {"orders-2", "orders-5"} & set(cluster.led_by(3))  # its preferred user partitions not elected


def test_lead_fails_when_no_probe_partition_can_be_led_by_the_canary(tmp_path):
    cluster = FakeCluster.of(topics={PROBE_TOPIC: 1, "orders": 6}, config=BASE)  # the probe's one partition: 1's
    run = deployed(cluster, tmp_path)
    with pytest.raises(RolloutError, match="no probe partition is led by a canary broker"):
        deploy.lead(run)


# ----- promote, rollback, verify -----

def judged(run: Rollout, verdict: str = PROMOTE) -> Rollout:
    run.state.update(verdict=Verdict(verdict=verdict, reason="unit"), status=RunStatus.judged(verdict))
    return run


def test_promote_rolls_the_baseline_then_the_canary_without_its_marker_and_restores_leaders(cluster, tmp_path):
    run = judged(deployed(cluster, tmp_path))
    deploy.lead(run)
    cluster.changes.clear()
    promote.promote(run)
    assert [c[:5] for c in cluster.changes if c[0] == "roll"] == [
        ("roll", 1, "3.9.2", CHANGE, None), ("roll", 2, "3.9.2", CHANGE, None), ("roll", 3, "3.9.2", CHANGE, None)]
    assert all(p.leader == p.replicas[0] for p in cluster.parts.values())
    assert run.state.status is RunStatus.PROMOTED
    assert run.open_probe.opened[-1] == "unit-promote"  # type: ignore[attr-defined]  # verify's probe follows


def test_promote_refuses_without_a_promote_verdict(cluster, tmp_path):
    run = deployed(cluster, tmp_path)
    with pytest.raises(RolloutError, match="the verdict is not reached yet; promote needs PROMOTE"):
        promote.promote(run)
    assert cluster.rolls() == [3, 2]


def test_rollback_brings_the_canary_back_and_leaves_the_control_as_it_is(cluster, tmp_path):
    run = deployed(cluster, tmp_path)
    deploy.lead(run)
    cluster.changes.clear()
    result = rollback.rollback(run)
    assert [c[:5] for c in cluster.changes if c[0] == "roll"] == [("roll", 3, "3.9.2", BASE, None)]
    assert [b.config for b in cluster.brokers()] == [BASE, BASE, BASE]
    assert sorted(result["elected"]) == [f"{PROBE_TOPIC}-2", "orders-2", "orders-5"]
    assert run.state.status is RunStatus.ROLLED_BACK


def test_rollback_is_refused_once_features_were_finalized(cluster, tmp_path):
    run = deployed(cluster, tmp_path)
    cluster.levels["metadata.version"] = 27
    with pytest.raises(RolloutError, match=r"refusing to roll back: feature levels were finalized \(metadata.version "
                                           r"21→27\)"):
        rollback.rollback(run)
    assert cluster.rolls() == [3, 2]


def test_verify_after_a_rollback_checks_the_snapshot_and_releases_the_lock(cluster, tmp_path):
    run = deployed(cluster, tmp_path)
    run.lock.acquire(run.run_id, 3)
    rollback.rollback(run)
    result = verify.verify(run)
    assert result["lock_released"] and run.state.status.verified


def test_verify_names_what_differs_from_the_snapshot_and_keeps_the_lock(cluster, tmp_path):
    run = deployed(cluster, tmp_path)
    run.lock.acquire(run.run_id, 3)
    rollback.rollback(run)
    cluster.brokers_[1] = cluster.brokers_[1].__class__(1, "3.9.2", {"num.io.threads": "4"}, None, True)
    cluster.parts[("orders", 0)].leader = 2  # orders-0 was led by its preferred replica, broker 1
    with pytest.raises(RolloutError, match=r"verify failed, the lock stays held until this is fixed: broker 1 is .*"
                                           r"expected .*; orders-0 led by 2, before by 1"):
        verify.verify(run)
    assert run.lock.held == run.run_id  # type: ignore[attr-defined]


def test_verify_fails_on_a_probe_that_loses_messages(cluster, tmp_path):
    run = deployed(cluster, tmp_path)
    run.open_probe = FakeProbes(losing=("verify",))
    rollback.rollback(run)
    with pytest.raises(RolloutError, match=r"the verify probe is not green \(tried 2 times\): 1 acknowledged "
                                           r"message\(s\) lost"):
        verify.verify(run)


def test_promote_in_batches_restarts_brokers_that_share_no_partition_together(tmp_path):
    """Six brokers, each partition on three neighbours (p+1, p+2, p+3): 1 and 4, 2 and 5 share no partition, so
    they may be away together; each restarted broker leaves its ISRs until it catches up."""
    cluster = FakeCluster.of(brokers=6, topics={PROBE_TOPIC: 6, "orders": 6}, config=BASE, catch_up=2)
    run = run_on(cluster, tmp_path, canary={"brokers": [6], "control": "none"}, promote={"max_batch": 2},
                 timeouts={"guard": "60s", "warm_up": "30s"})
    run.state.update(canary_brokers=[6], control_brokers=[], before=snapshot(run), status=RunStatus.PREFLIGHT)
    run.step = "deploy-canary"
    deploy.deploy_canary(run)
    judged(run)
    cluster.changes.clear()
    run.step = "promote"
    result = promote.promote(run)
    assert [b["brokers"] for b in result["plan"]["batches"]] == [[1, 4], [2, 5], [3, 6]]  # the canary with a mate
    assert cluster.rolls() == [1, 4, 2, 5, 3, 6]
    assert cluster.shortest_isr >= 2  # min.insync.replicas held while every batch was away
    assert [r["batch"] for r in result["rolled"]] == [[1, 4], [1, 4], [2, 5], [2, 5], [3, 6], [3, 6]]
    # what the batch's own ISR looks saw while it was away: one replica of three out, min ISR 2 kept
    assert {r["isr_headroom_min"] for r in result["rolled"] if "batch" in r} == {0}
    assert "promotion plan" in [e["action"] for e in run.audit.entries()]


def six_in_batches(tmp_path: Path, **spec) -> tuple[FakeCluster, Rollout, dict[str, tuple[int, ...]]]:
    """Six brokers (each partition on p+1, p+2, p+3), broker 6 the canary, deployed and judged PROMOTE; with the
    replica orders before the promotion."""
    cluster = FakeCluster.of(brokers=6, topics={PROBE_TOPIC: 6, "orders": 6}, config=BASE, catch_up=2)
    run = run_on(cluster, tmp_path, **{"canary": {"brokers": [6], "control": "none"},
                                       "timeouts": {"guard": "60s", "warm_up": "30s"}} | spec)
    run.state.update(canary_brokers=[6], control_brokers=[], before=snapshot(run), status=RunStatus.PREFLIGHT)
    run.step = "deploy-canary"
    deploy.deploy_canary(run)
    judged(run)
    cluster.led_at_roll.clear()
    cluster.changes.clear()
    run.step = "promote"
    return cluster, run, {p.name: p.replicas for p in cluster.partitions()}


def test_promote_drains_each_batch_first_and_gives_the_leadership_back(tmp_path):
    cluster, run, orders = six_in_batches(tmp_path, promote={"max_batch": 2})
    promote.promote(run)
    assert cluster.led_at_roll == [(b, 0) for b in (1, 4, 2, 5, 3, 6)]  # each led nothing when it stopped
    assert {p.name: p.replicas for p in cluster.partitions()} == orders  # the original orders back
    assert all(p.leader == p.replicas[0] for p in cluster.partitions())
    assert run.state.record.drained is None
    drained = [e for e in run.audit.entries() if e["action"] == "drained"]
    assert [e["brokers"] for e in drained] == [[1, 4], [2, 5], [3, 6]] and all(e["drained"] for e in drained)


def test_without_drain_a_broker_stops_while_it_leads(tmp_path):
    cluster, run, _ = six_in_batches(tmp_path, promote={"max_batch": 2, "drain": False})
    promote.promote(run)
    assert any(led for _, led in cluster.led_at_roll)
    assert "drained" not in [e["action"] for e in run.audit.entries()]


def test_a_batch_restarts_at_once_when_the_deployer_takes_concurrent_rolls(tmp_path):
    cluster, run, _ = six_in_batches(tmp_path, promote={"max_batch": 2})
    cluster.capabilities = frozenset({"controllers", "stop_start", "concurrent_rolls"})  # type: ignore[misc]
    first, second = threading.Barrier(2, timeout=10), threading.Barrier(2, timeout=10)
    cluster.together = {1: first, 4: first, 2: second, 5: second}  # one roll waits for its batch mate's
    result = promote.promote(run)
    assert sorted(cluster.rolls()[:2]) == [1, 4] and sorted(cluster.rolls()[2:4]) == [2, 5]
    assert [r["batch"] for r in result["rolled"]] == [[1, 4], [1, 4], [2, 5], [2, 5], [3, 6], [3, 6]]


def test_a_promotion_cut_off_mid_batch_leaves_the_drain_recorded_and_rollback_gives_it_back(tmp_path):
    cluster, run, orders = six_in_batches(tmp_path, promote={"max_batch": 2})
    led = sorted(p.name for p in cluster.partitions() if p.leader in (1, 4))  # the first batch's
    cluster.failing = {4}
    with pytest.raises(RuntimeError, match="broker 4"):
        promote.promote(run)
    assert run.state.record.drained  # the orders before the drain, in run.json
    assert {p.name: p.replicas for p in cluster.partitions()} != orders
    run.step = "rollback"
    cluster.failing.clear()
    result = rollback.rollback(run)
    assert result["undrained"] == led
    assert {p.name: p.replicas for p in cluster.partitions()} == orders and run.state.record.drained is None


def test_a_promotion_cut_off_mid_batch_resumes_with_the_original_orders(tmp_path):
    cluster, run, orders = six_in_batches(tmp_path, promote={"max_batch": 2})
    cluster.failing = {4}
    with pytest.raises(RuntimeError):
        promote.promote(run)
    cluster.failing.clear()
    promote.promote(run)
    assert {p.name: p.replicas for p in cluster.partitions()} == orders and run.state.record.drained is None
    assert all(p.leader == p.replicas[0] for p in cluster.partitions())


# ----- gated waves: a look between waves, a person's pause, a regression rolls the promoted waves back -----

class Looks:
    """wave_look's stand-in: records each look (wave, promoted brokers) and answers PROMOTE, or ROLLBACK at the
    wave `regress_at`; `then` runs during a look (a person pausing the run meanwhile)."""

    def __init__(self, regress_at: int | None = None, then=None):
        self.seen: list[tuple[int, list[int]]] = []
        self.controls: list[int | None] = []
        self.regress_at, self.then = regress_at, then

    def __call__(self, run: Rollout, wave: int, promoted: list[int], control: int | None = None) -> Look:
        self.seen.append((wave, promoted))
        self.controls.append(control)
        run.audit.record(run.step, "wave look", wave=wave, verdict="ROLLBACK" if wave == self.regress_at else PROMOTE)
        if self.then:
            self.then(run)
        if wave == self.regress_at:
            return Look(verdict="ROLLBACK", reason="e2e_latency_p99: promoted 480 vs 12 ms", failed=["e2e_latency_p99"])
        return Look(verdict=PROMOTE, reason="no regression")


WAVES = {"waves": ["25%", "50%", "all"], "look": "30s"}


def test_promote_in_waves_looks_after_each_wave_but_the_last(tmp_path, monkeypatch):
    cluster, run, _ = six_in_batches(tmp_path, promote=WAVES)
    looks = Looks()
    monkeypatch.setattr(promote, "wave_look", looks)
    result = promote.promote(run)
    assert [w["batches"] for w in result["plan"]["waves"]] == [[[1], [2]], [[3]], [[4], [5], [6]]]
    assert looks.seen == [(1, [1, 2]), (2, [1, 2, 3])]
    assert cluster.rolls() == [1, 2, 3, 4, 5, 6] and run.state.status == RunStatus.PROMOTED
    assert [lk["wave"] for lk in result["looks"]] == [1, 2]


def test_with_control_brokers_each_look_has_a_control_restarted_unchanged_just_before(tmp_path, monkeypatch):
    cluster, run, _ = six_in_batches(tmp_path, promote=WAVES, canary={"brokers": [6], "control": [5]})
    run.state.update(control_brokers=[5])
    looks = Looks()
    monkeypatch.setattr(promote, "wave_look", looks)
    led_at_look: list[set[int]] = []
    looks.then = lambda r: led_at_look.append({p.leader for p in cluster.partitions()})
    result = promote.promote(run)
    # The first broker of the next wave, restarted on the baseline just before each look, then promoted in its wave.
    assert looks.seen == [(1, [1, 2]), (2, [1, 2, 3])] and looks.controls == [3, 4]
    assert cluster.rolls() == [1, 2, 3, 3, 4, 4, 5, 6] and run.state.status == RunStatus.PROMOTED
    controls = [e for e in run.audit.entries() if e["action"] == "restart broker" and e["phase"] == "control"]
    assert [(e["broker"], e["after"]["config"]) for e in controls] == [(3, BASE), (4, BASE)]
    assert all(led == {1, 2, 3, 4, 5, 6} for led in led_at_look)  # its leadership back before the look
    assert [lk["control"] for lk in result["looks"]] == [3, 4]
    assert "against the next wave's first broker restarted unchanged" in "\n".join(promote.plan_now(run)["lines"])


def test_a_regression_at_a_look_rolls_the_promoted_waves_back_and_promotes_no_further(tmp_path, monkeypatch):
    cluster, run, _ = six_in_batches(tmp_path, promote=WAVES)
    monkeypatch.setattr(promote, "wave_look", Looks(regress_at=1))
    result = promote.promote(run)
    assert "wave 1" in result["regressed"] and "e2e_latency_p99" in result["regressed"]
    assert run.state.verdict.verdict == "ROLLBACK" and run.state.verdict.failed == ["e2e_latency_p99"]
    assert run.state.status == RunStatus.ROLLED_BACK
    assert cluster.rolls()[:2] == [1, 2] and sorted(cluster.rolls()[2:]) == [1, 2, 6]  # back: wave 1, the canary
    assert all(b.config == BASE for b in cluster.brokers())
    with pytest.raises(RolloutError, match="ROLLBACK"):
        promote.promote(run)  # decided: it only goes back


def test_a_pause_during_a_look_stops_before_the_next_wave_and_resume_goes_on_where_it_stopped(tmp_path, monkeypatch):
    cluster, run, _ = six_in_batches(tmp_path, promote=WAVES, timeouts={"guard": "60s", "warm_up": "30s",
                                                                         "pause": "10m"})
    looks = Looks(then=lambda r: pause.pause(r.store, r.audit, "alice", "the fleet's SLO page is red"))
    monkeypatch.setattr(promote, "wave_look", looks)
    with pytest.raises(WaitTimeout, match=r"paused by alice .*SLO page is red.*before wave 2 of 3.*resume"):
        promote.promote(run)
    assert cluster.rolls() == [1, 2] and looks.seen == [(1, [1, 2])]
    assert pause.resume(run.store, run.audit, "alice")["by"] == "alice" and pause.paused(run.store) is None
    looks.then = None
    promote.promote(run)
    assert cluster.rolls() == [1, 2, 3, 4, 5, 6]  # wave 1 not restarted again
    assert looks.seen == [(1, [1, 2]), (2, [1, 2, 3])]  # nor looked at again
    assert run.state.status == RunStatus.PROMOTED


def test_wave_by_wave_as_the_dag_runs_it_an_approval_given_once(tmp_path, monkeypatch):
    cluster, run, _ = six_in_batches(tmp_path, promote=WAVES)
    judged(run, "INCONCLUSIVE")
    looks = Looks()
    monkeypatch.setattr(promote, "wave_look", looks)
    with pytest.raises(RolloutError, match="approval"):
        promote.promote(run, through_wave=1)
    first = promote.promote(run, approve=True, through_wave=1)
    assert (first["waves_done"], first["waves"]) == (1, 3) and cluster.rolls() == [1, 2]
    assert run.state.status != RunStatus.PROMOTED and "controllers" not in first
    promote.promote(run, through_wave=2)  # approved once: the later waves need no second approval
    assert cluster.rolls() == [1, 2, 3] and looks.seen == [(1, [1, 2]), (2, [1, 2, 3])]
    last = promote.promote(run, through_wave=3)
    assert cluster.rolls() == [1, 2, 3, 4, 5, 6] and run.state.status == RunStatus.PROMOTED
    assert "controllers" in last and len(looks.seen) == 2
    assert len(promote.promotion_waves(run)) == 3


def test_on_three_brokers_with_rf_3_no_two_may_go_together(cluster, tmp_path):
    run = judged(deployed(cluster, tmp_path, promote={"max_batch": 3}))
    cluster.changes.clear()
    result = promote.promote(run)
    assert [b["brokers"] for b in result["plan"]["batches"]] == [[1], [2], [3]] and cluster.rolls() == [1, 2, 3]


# ----- controllers: last, one at a time, only while a caught-up majority remains -----

def test_a_controller_is_not_restarted_while_another_voter_lags_and_is_once_it_caught_up(tmp_path):
    cluster = FakeCluster.of(topics={PROBE_TOPIC: 3}, config=BASE, controller_ids=(3000, 3001, 3002),
                             lagging={3002})
    run = preflighted(cluster, tmp_path)
    run.step = "promote"
    with pytest.raises(GuardRefused, match=r"restarting controller 3000 would leave 1 of 3 voters caught up.*"
                                           r"The controller was not restarted"):
        roll_controllers(run, lambda c: "4.1.2")
    assert [c for c in cluster.changes if c[0] == "roll controller"] == []
    cluster.lagging.clear()
    assert roll_controllers(run, lambda c: "4.1.2") == [3000, 3001, 3002]
    assert [c[1] for c in cluster.changes if c[0] == "roll controller"] == [3000, 3001, 3002]


def test_the_plan_shows_the_promotion_before_anything_restarts_and_promote_follows_it(cluster, tmp_path):
    run = preflighted(cluster, tmp_path)
    shown = promote.plan_now(run)
    assert [b["brokers"] for b in shown["batches"]] == [[1], [2], [3]] and shown["controllers"] == [3000]
    assert shown["lines"][0].startswith("3 batch(es) of at most 1 broker(s)")
    assert cluster.changes == []  # the plan changed nothing
    deploy.deploy_canary(run)
    run.state.update(verdict=Verdict(verdict=PROMOTE, reason="test"), status=RunStatus.JUDGED_PROMOTE)
    run.step = "promote"
    result = promote.promote(run)
    assert result["plan"]["batches"] == shown["batches"]
    assert [c[1] for c in cluster.changes if c[0] == "roll"][-3:] == [1, 2, 3]  # after the canary's own roll


def test_promote_dry_run_prints_the_plan_and_restarts_nothing(cluster, tmp_path, monkeypatch, capsys):
    from canary.cli import main
    from canary.rollout.broker import cli as broker_cli
    run = preflighted(cluster, tmp_path)
    monkeypatch.setattr(broker_cli, "open_run", lambda args: run)
    monkeypatch.setattr(broker_cli, "cmd_step", lambda args: pytest.fail("promote ran"))
    assert main(["rollout", "promote", "--spec", "unused.yaml", "--dry-run"]) == 0
    assert capsys.readouterr().out.startswith("3 batch(es) of at most 1 broker(s)")
    assert cluster.changes == []


def test_before_preflight_the_plan_takes_the_canaries_preflight_would_choose(cluster, tmp_path):
    shown = promote.plan_now(run_on(cluster, tmp_path))
    assert shown["canary_brokers"] == [3] and [b["brokers"] for b in shown["batches"]][-1] == [3]


# ----- finalize: its own step, after the bake -----

def test_finalize_waits_for_the_bake_looks_at_the_cluster_then_raises_the_levels_once(cluster, tmp_path,
                                                                                    monkeypatch):
    from canary.rollout.broker.kind import FINALIZE, VERIFY
    from canary.rollout.broker.kind import PROMOTE as PROMOTE_STEP
    raised = []

    def levels(run, version):  # the release's levels, as Kafka's FeatureCommand maps 4.1 (a JVM in real runs)
        changed = run.admin.finalize({"metadata.version": 27})
        raised.append(changed)
        return {k: list(v) for k, v in changed.items()}
    monkeypatch.setattr(finalize, "finalize", levels)
    run = judged(deployed(cluster, tmp_path, change={"version": "4.1.2", "config": CHANGE}))
    with pytest.raises(RolloutError, match="nothing to finalize yet: the rollout is at 'judged PROMOTE'"):
        FINALIZE(run)
    result = PROMOTE_STEP(run)
    assert "finalize" in result and cluster.levels["metadata.version"] == 21  # promote never finalizes
    VERIFY(run)
    with pytest.raises(RolloutError, match=r"the promoted fleet bakes until .*Z \(6\d\d s more; promote.bake 10m\): "
                                           r"finalize then"):
        FINALIZE(run)
    run.state.record.steps["promote"].finished_ms -= 601_000  # ten minutes on
    cluster.parts[("orders", 0)].isr.remove(2)
    with pytest.raises(RolloutError, match=r"not finalized, the cluster is not as promoted: cluster not healthy"):
        FINALIZE(run)
    assert raised == []
    cluster.parts[("orders", 0)].isr.append(2)
    assert FINALIZE(run)["finalized"] == {"metadata.version": [21, 27]}
    assert FINALIZE(run)["finalized"] == {}  # run again: nothing more
    assert cluster.levels["metadata.version"] == 27 and run.lock.held is None  # type: ignore[attr-defined]
