"""The broker rollout engine on real brokers: a good canary promotes, bad canaries roll back to exactly the
state before, the safe-roll guard and the lock refuse, a rollout killed mid-deploy converges when re-run."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, KafkaException, TopicPartition
from conftest import running_cluster
from waiting import killed_when, wait_until

from canary.cluster import distribution
from canary.cluster.distribution import BASELINE_VERSION, TARGET_VERSION
from canary.cluster.local import LocalCluster
from canary.cluster.traffic import TrafficSpec, UserTraffic
from canary.observations import OBSERVATIONS_TOPIC, Observation, read_file_counted
from canary.process import free_port
from canary.rollout.broker import BROKER, Rollout
from canary.rollout.broker.rolling import GuardRefused
from canary.rollout.broker.spec import load_spec
from canary.rollout.core import RolloutError, run_all
from canary.rollout.core.lock import ClusterLock, LockHeld

pytestmark = pytest.mark.integration

# Steady client traffic on a user topic for the whole rollout: about 333 kB/s into each of 3 brokers, representative
# with margin (traffic.min_bytes_per_s: 100 kB/s) and light on a 2-core machine.
USER_TRAFFIC = TrafficSpec("orders", 1000, 1000, 6, 3)


def end_offsets(cluster: LocalCluster, topic: str) -> int:
    """The sum of `topic`'s end offsets: how many records its producers have written (0 while the topic, just
    created, is not yet in every broker's metadata or a partition has no leader yet)."""
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "end-offsets"})
    try:
        parts = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        return sum(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in parts)
    except (KafkaException, KeyError):
        return 0
    finally:
        consumer.close()

# Enough traffic for the judge in a short window: one canary partition at 50 msg/s gives ~1,000 samples. The
# latency floors suit a shared 2-core test machine, where a freshly restarted JVM and the neighbours' load move
# tail latency by tens of milliseconds; the bad canaries here are far beyond them.
_LATENCY_FLOOR = {"rel_floor": 0.5, "abs_floor": 40.0}
FAST_JUDGE = {"warmup_s": 15, "bucket_s": 5, "metrics": {
    m: _LATENCY_FLOOR for m in ("e2e_latency_p50", "e2e_latency_p95", "produce_latency_p99")} | {
    "e2e_latency_p99": _LATENCY_FLOOR | {"slo": None}}}  # seconds-long tails when the machine is saturated


# Load sized for the test machine (9,000 records/s of 1 kB, 3 MB/s into each broker): one I/O thread is then 0.13-0.20
# busy where eight are 0.05-0.08 (bench/capacity_eval.py, docs/bench.md), for the same requests; the default floors
# of busy share per request (x2) are lowered here so a run on a machine busier or quieter than those still shows the
# cut beyond them. A short window judges effort from the warm-up's end: the test cluster's JVMs compile their hot
# code at once (-XX:TieredStopAtLevel=1), so a just-restarted one is not the default JIT's slow first minute.
CAPACITY_JUDGE = FAST_JUDGE | {"metrics": FAST_JUDGE["metrics"] | {
    f"broker_{pool}_busy_per_request": {"rel_floor": 0.5, "settle_s": 0.0}
    for pool in ("request_handler", "network_processor")}}


def spec_for(cluster: LocalCluster, run_id: str, **overrides):
    """A short rollout on an idle test cluster: the probe judges alone (capacity: not_required, so no load either)
    and no control broker is restarted, unless a test asks for the default."""
    raw = {"cluster": {"dir": str(cluster.directory)}, "change": {"version": TARGET_VERSION},
           "canary": {"count": 1}, "probe": {"window": "45s", "interim_interval": "10s", "rate": 50, "preflight": "3s",
                                        "calibration": "12s"},
           "judge": {"engine": "inline", "config": FAST_JUDGE}, "timeouts": {"guard": "60s", "warm_up": "120s"},
           "capacity": "not_required", "run_id": run_id}
    raw.update(overrides)
    raw["canary"] = {"control": "none", **raw["canary"]}
    return load_spec(raw)


def observation_leaders(cluster: LocalCluster) -> set[int]:
    """The preferred leaders of the observations topic's partitions."""
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "observation-leaders"})
    try:
        topic = consumer.list_topics(OBSERVATIONS_TOPIC, timeout=10).topics[OBSERVATIONS_TOPIC]
        return {p.replicas[0] for p in topic.partitions.values()}
    finally:
        consumer.close()


def snapshot(cluster: LocalCluster) -> dict:
    cluster.reload()
    return {n.node_id: (n.version, dict(n.config), n.rack) for n in cluster.state.nodes}


def restarts(rollout: Rollout, step: str) -> list[int]:
    return [e["broker"] for e in rollout.audit.entries() if e["step"] == step and e["action"] == "restart broker"]


@pytest.fixture(scope="module")
def baseline_cluster() -> Iterator[LocalCluster]:
    """A 3-broker cluster every test here leaves as it found it (each bad canary is rolled back)."""
    with running_cluster("rollout-baseline", brokers=3) as cluster:
        yield cluster


def test_good_canary_carries_its_share_of_real_traffic_promotes_the_fleet_and_finalizes(cluster_factory, tmp_path):
    """The default spec (every topic led, capacity required, load auto, a control broker) on a cluster that carries
    its own traffic: Kafka's ProducerPerformance and ConsumerPerformance on a user topic the spec never names."""
    cluster = cluster_factory(brokers=3)
    # The inline engine: Spark judges real rollouts in the e2e and distributed tests (and the broker readings in
    # tests/unit/analysis/test_job.py); here a Spark start would only add a minute.
    spec = spec_for(cluster, "good", judge={"engine": "inline", "config": FAST_JUDGE}, capacity="required",
                    canary={"count": 1, "control": "auto"}, promote={"bake": "5s"})
    rollout = Rollout(spec, tmp_path / "run")
    with UserTraffic(distribution.ensure(BASELINE_VERSION), cluster.bootstrap_servers, USER_TRAFFIC,
                     tmp_path / "traffic") as traffic:
        wait_until(lambda: end_offsets(cluster, USER_TRAFFIC.topic) > 5_000, 60, "user traffic flowing")
        result = run_all(BROKER, rollout)
        traffic.check()  # the clients ran through every roll

    outcome = (result.outcome, result.status, result.verdict)
    assert outcome == ("PROMOTE", "verified promoted", "PROMOTE"), result
    stepped = rollout.state.record.to_json()["steps"]
    # Real traffic before the change was representative, so `load: auto` added none.
    preflight = stepped["preflight"]["result"]
    assert preflight["traffic"]["representative"] and preflight["load"]["rate"] == 0, preflight
    assert preflight["load"]["rule"].startswith("no load: the brokers already take"), preflight["load"]
    # The canary led its preferred partitions of the user topic and carried its share before the window started,
    lead = stepped["lead"]["result"]
    assert USER_TRAFFIC.topic in lead["topics_led"] and lead["traffic_share"]["fair"], lead
    # and through the window, which the verdict records as the traffic it judged.
    judged = rollout.state.record.to_json()["verdict"]["traffic"]
    assert judged["representative"] and judged["fair"], judged
    canary_share = judged["share"][str(rollout.state.record.canary_brokers[0])]
    assert all(0.5 <= s <= 1.5 for s in canary_share.values()) and "bytes_in_per_s" in canary_share, judged
    assert judged["baseline"]["bytes_in_per_s"] >= spec.traffic.min_bytes_per_s, judged
    assert {v[0] for v in snapshot(cluster).values()} == {TARGET_VERSION}  # brokers and controller
    assert all(rack is None for _, _, rack in snapshot(cluster).values())  # no canary marker left
    # Promote never finalizes: finalize is its own step, refused until the promoted fleet has baked.
    assert cluster.features().finalized == rollout.snapshot.features
    assert "finalize" in stepped["promote"]["result"], stepped["promote"]["result"]
    assert stepped["judge"]["result"]["engine"] == "inline"
    # The brokers' own metrics were read beside the probe and judged, canary broker against the control broker:
    # the highest id that is not a canary, restarted with nothing changed right after the canary.
    canary, control = rollout.state.record.canary_brokers, rollout.state.record.control_brokers
    assert control == [max({1, 2, 3} - {*canary})] and stepped["preflight"]["result"]["control_brokers"] == control
    restarted = stepped["deploy-canary"]["result"]["controls_restarted"]  # proven by its JVM's new start time
    assert [r["broker"] for r in restarted] == control and restarted[0]["process_started"], restarted
    assert stepped["preflight"]["result"]["broker_metrics"] == "deployer"
    readings = stepped["probe-window"]["result"]["broker_readings"]
    assert readings["written"] > 0 and readings["failed"] == 0, readings
    for phase in ("preflight-1", "deploy", "window-1", "promote"):  # every phase keeps them; the window's are judged
        assert '"kind":"broker"' in (tmp_path / "run" / f"observations-{phase}.jsonl").read_text(), phase
    verdict = json.loads((tmp_path / "run" / "analysis-1" / "verdict.json").read_text())
    judged = {m["name"]: m for m in verdict["metrics"] if m["kind"] == "broker"}
    # The window probed the canary's and the control's partitions alone, so the probe's baseline lane was the
    # control, fresh with fresh; its latencies were judged against how the brokers differed before the change.
    assert verdict["brokers"] == {"canary": canary, "baseline": control, "calibrated_on": [1, 2, 3]}
    assert verdict["metrics"][0]["calibration"]["ratio"] > 0, verdict["metrics"][0]
    produce = judged["broker_produce_total_time_p99_ms"]
    assert produce["decision"] in ("PASS", "INSUFFICIENT_DATA"), produce
    assert produce["canary"]["brokers"] == canary and produce["baseline"]["brokers"] == control, produce
    assert "control brokers" in produce["baseline"]["what"], produce
    for step in ("deploy-canary", "promote"):
        probe = stepped[step]["result"]["probe"]
        assert probe["acked"] > 0 and probe["lost"] == 0, (step, probe)
    assert sum(t["lost"] for t in stepped["probe-window"]["result"]["probe"].values()) == 0
    assert restarts(rollout, "deploy-canary") == [*canary, *control]
    assert sorted(restarts(rollout, "promote")) == [1, 2, 3]  # the canary once more, to drop its marker
    assert ClusterLock(cluster.bootstrap_servers).holder() is None
    assert (tmp_path / "run" / "report.html").read_text().count("restart broker") == 5

    # After the bake (5 s here; verify took longer), finalize raises the release's levels under the lock, once.
    time.sleep(max(0.0, 5 - (time.time() * 1000 - rollout.state.record.step("promote").finished_ms) / 1000))
    finalized = BROKER.step("finalize")(rollout)
    assert finalized["finalized"]["metadata.version"][1] > rollout.snapshot.features["metadata.version"]
    assert cluster.features().finalized["metadata.version"] > rollout.snapshot.features["metadata.version"]
    assert BROKER.step("finalize")(rollout)["finalized"] == {}
    assert ClusterLock(cluster.bootstrap_servers).holder() is None
    # Finalized levels cannot go down: a rollback now is refused and changes nothing.
    before = snapshot(cluster)
    with pytest.raises(RolloutError, match="refusing to roll back: feature levels were finalized"):
        BROKER.step("rollback")(rollout)
    assert snapshot(cluster) == before
    # A finished rollout run again does nothing.
    assert run_all(BROKER, rollout).note == "the rollout had already finished"


def test_bad_config_canary_fails_fast_and_rolls_back_to_the_exact_state(baseline_cluster, tmp_path):
    before = snapshot(baseline_cluster)
    spec = spec_for(baseline_cluster, "bad-config", change={"config": {"message.max.bytes": "100"}},
                    canary={"brokers": [2]}, probe={"window": "120s", "interim_interval": "10s", "rate": 50,
                                                    "preflight": "3s", "calibration": "3s"}, capacity="required")
    rollout = Rollout(spec, tmp_path / "run")
    result = run_all(BROKER, rollout)

    assert (result.outcome, result.verdict) == ("ROLLBACK", "ROLLBACK")
    # The idle cluster (the probe alone) is not representative: `load: auto` added what it lacked, within its ceiling,
    # measured from the brokers' own metrics in preflight, and the window carried it.
    preflight = rollout.state.record.steps["preflight"].result
    assert not preflight["traffic"]["representative"], preflight["traffic"]
    sized = preflight["load"]
    assert 0 < sized["bytes_per_s_per_broker"] <= spec.load.ceiling_bytes_per_s, sized
    assert sized["measured_bytes_in_per_s"] < spec.traffic.min_bytes_per_s and "per broker: the brokers take" in \
        sized["rule"], sized
    assert rollout.state.record.to_json()["window"]["load"]["rate_per_partition"] == sized["rate"]
    gate = rollout.state.record.to_json()["verdict"]
    # Every produce to the canary fails: the error rate or the availability guard (whichever has enough data at
    # the look that stops the window) names it.
    assert gate["stopped_early"] and ("produce_error_rate" in gate["reason"] or "availability" in gate["reason"])
    assert snapshot(baseline_cluster) == before
    assert restarts(rollout, "deploy-canary") == [2] and restarts(rollout, "rollback") == [2]
    verified = rollout.state.record.steps["verify"].result
    assert verified["status"] == "rolled_back" and verified["lock_released"]
    # The gate's own observations never depended on the canary that refused writes: the observations topic is led by
    # the other brokers, and the window's file holds what the probe saw in both lanes.
    assert preflight["observations_led_by_canary"] == []
    assert observation_leaders(baseline_cluster) and 2 not in observation_leaders(baseline_cluster)
    records, _ = read_file_counted(rollout.local(rollout.record.window.observations))
    assert {r.lane for r in records if isinstance(r, Observation)} == {"canary", "baseline"}


# make faults: a fault injected into the canary's clients (the DAG's bad canary is rolled back in make test).
@pytest.mark.slow
def test_delayed_canary_rolls_back(baseline_cluster, tmp_path):
    before = snapshot(baseline_cluster)
    spec = spec_for(baseline_cluster, "delay", change={"version": TARGET_VERSION}, fault={"client_delay_ms": 250})
    rollout = Rollout(spec, tmp_path / "run")
    result = run_all(BROKER, rollout)

    assert result.outcome == "ROLLBACK", result
    assert "latency" in result.reason
    assert snapshot(baseline_cluster) == before
    assert {v[0] for v in snapshot(baseline_cluster).values()} == {BASELINE_VERSION}


# make faults: minutes on a cluster of its own with real traffic (the judge's part: tests/unit/judge/test_brokers.py).
@pytest.mark.slow
def test_harm_that_lands_on_the_baseline_brokers_rolls_back_on_their_own_times_before_the_change(cluster_factory,
                                                                                                tmp_path):
    """A canary that is a slow follower (it waits for 1 MB or 50 ms before it fetches) holds up every acks=all write
    to the partitions it follows, all led by baseline brokers: canary against baseline it looks as healthy as they
    do, but the baseline brokers' produce requests take many times as long as they did before the change. The
    default spec, real traffic."""
    cluster = cluster_factory(brokers=3)
    slow = {"replica.fetch.min.bytes": "1000000", "replica.fetch.wait.max.ms": "50"}
    spec = spec_for(cluster, "slow-follower", change={"config": slow}, canary={"brokers": [2]}, capacity="required",
                    probe={"window": "90s", "interim_interval": "15s", "rate": 50, "preflight": "3s",
                           "calibration": "30s"})
    before = snapshot(cluster)
    rollout = Rollout(spec, tmp_path / "run")
    with UserTraffic(distribution.ensure(BASELINE_VERSION), cluster.bootstrap_servers, USER_TRAFFIC,
                     tmp_path / "traffic") as traffic:
        wait_until(lambda: end_offsets(cluster, USER_TRAFFIC.topic) > 5_000, 60, "user traffic flowing")
        result = run_all(BROKER, rollout)
        traffic.check()
    verdict = rollout.state.record.to_json()["verdict"]
    assert result.outcome == "ROLLBACK" and verdict["failed"] == ["baseline_produce_total_time_mean_ms"], verdict
    assert "baseline brokers' median" in verdict["reason"] and "before the change" in verdict["reason"], verdict
    assert snapshot(cluster) == before


def test_a_capacity_cut_rolls_back_on_the_brokers_effort_under_load(baseline_cluster, tmp_path):
    """One network and one I/O thread on the canary broker: under load (the same records per second into every
    broker's partition) the canary broker works harder than the baseline brokers at every reading, by more than
    they differ among themselves. The light probe's latency may move too on a busy machine (CI saw its p99 at
    288 vs 179 ms), so the window is judged whole and the brokers' metrics must be among what failed."""
    before = snapshot(baseline_cluster)
    spec = spec_for(baseline_cluster, "capacity-cut", change={"config": {"num.network.threads": "1",
                                                                         "num.io.threads": "1"}},
                    canary={"brokers": [3]}, probe={"window": "60s", "interim_interval": "60s", "rate": 50,
                                                    "preflight": "3s", "calibration": "3s"},
                    broker_metrics={"interval": "2s"}, load={"rate": 3000, "record_size": 1000},
                    judge={"engine": "inline", "config": CAPACITY_JUDGE})
    rollout = Rollout(spec, tmp_path / "run")
    result = run_all(BROKER, rollout)

    verdict = rollout.state.record.to_json()["verdict"]
    failed = verdict["failed"]
    assert result.outcome == "ROLLBACK" and verdict["analysis"], verdict
    metrics = json.loads((tmp_path / "run" / verdict["analysis"] / "verdict.json").read_text())["metrics"]
    assert failed == [m["name"] for m in metrics if m["decision"] == "FAIL"], verdict
    assert any(name.endswith("_busy_per_request") for name in failed), failed  # the brokers' own effort saw it
    assert snapshot(baseline_cluster) == before
    load = rollout.state.record.to_json()["window"]["load"]
    assert load["lanes"]["canary"]["partitions"] == 1 and load["lanes"]["baseline"]["partitions"] == 2, load
    assert load["lanes"]["canary"]["acked"] > 0 and load["stopped_because"] is None, load


def test_guard_refuses_a_restart_below_min_isr_and_the_lock_refuses_a_second_rollout(baseline_cluster, tmp_path):
    spec = spec_for(baseline_cluster, "guarded", canary={"brokers": [2]}, timeouts={"guard": "0s"})
    rollout = Rollout(spec, tmp_path / "run")
    BROKER.step("preflight")(rollout)

    # A second rollout on the locked cluster is refused before it changes anything.
    other = Rollout(spec_for(baseline_cluster, "intruder"), tmp_path / "other")
    with pytest.raises(LockHeld, match="held by rollout guarded"):
        BROKER.step("preflight")(other)

    baseline_cluster.stop_node(1)  # every probe partition is now at ISR 2 = min ISR
    try:
        pid = baseline_cluster.state.node(2).pid
        with pytest.raises(GuardRefused, match="broker 2 may not restart: __kafka_canary-.* would drop below"):
            BROKER.step("deploy-canary")(rollout)
        baseline_cluster.reload()
        assert baseline_cluster.state.node(2).pid == pid  # not restarted
        assert any(e["action"] == "guard refused" for e in rollout.audit.entries())
    finally:
        baseline_cluster.start_node(1)

    # Nothing changed, so the way back is short: rollback restarts nothing, verify releases the lock.
    assert BROKER.step("rollback")(rollout)["rolled"] == []
    assert BROKER.step("verify")(rollout)["lock_released"]
    assert ClusterLock(baseline_cluster.bootstrap_servers).holder() is None


def test_bad_spec_against_the_cluster_is_refused_before_any_change(baseline_cluster, tmp_path):
    before = snapshot(baseline_cluster)
    closed = free_port()
    unreadable = {"prometheus": {"url": f"http://127.0.0.1:{closed}", "brokers": {1: "a", 2: "b", 3: "c"}}}
    cases = [({"canary": {"brokers": [9]}}, r"\[9\] are not brokers"),
             ({"canary": {"count": 3}}, "leaves no baseline"),
             ({"broker_metrics": unreadable}, f"broker_metrics: cannot reach Prometheus at http://127.0.0.1:{closed}"),
             ({"broker_metrics": {"prometheus": {"url": "http://127.0.0.1:1", "brokers": {1: "a"}}}},
              r"brokers \[2, 3\] have no label value"),
             # Values the canary would refuse at start, with the broker's own words (static keys too), before any
             # restart: the same check with and without a version change.
             ({"change": {"config": {"num.io.threads": ".nan", "replica.fetch.min.bytes": "abc"}}},
              r"num.io.threads: Invalid value .nan for configuration num.io.threads: Not a number of type INT; "
              r"replica.fetch.min.bytes: Invalid value abc .* Not a number of type INT\); fix them"),
             ({"change": {"version": TARGET_VERSION, "config": {"log.segment.bytes": "10"}}},
              rf"Kafka {re.escape(TARGET_VERSION)} broker refuses \(log.segment.bytes: Invalid value 10 .* at least "
              r"1048576")]
    for i, (overrides, message) in enumerate(cases):
        rollout = Rollout(spec_for(baseline_cluster, f"bad-{i}", **overrides), tmp_path / str(i))
        with pytest.raises(RolloutError, match=message):
            BROKER.step("preflight")(rollout)
    assert snapshot(baseline_cluster) == before
    assert ClusterLock(baseline_cluster.bootstrap_servers).holder() is None


# make faults: the rollout process killed mid-deploy (a resumed run is unit-tested: tests/unit/rollout).
@pytest.mark.slow
def test_rollout_killed_mid_deploy_converges_without_extra_restarts(baseline_cluster, tmp_path):
    before = snapshot(baseline_cluster)
    raw = {"cluster": {"dir": str(baseline_cluster.directory)}, "change": {"config": {"message.max.bytes": "100"}},
           "canary": {"brokers": [2, 3]}, "probe": {"window": "60s", "interim_interval": "10s", "rate": 50,
                                                    "preflight": "3s", "calibration": "3s"},
           "judge": {"engine": "inline", "config": FAST_JUDGE}, "capacity": "not_required", "run_id": "killed"}
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(json.dumps(raw))
    run_dir = tmp_path / "run"
    rollout = Rollout(load_spec(spec_file), run_dir)
    BROKER.step("preflight")(rollout)

    killed_when(["rollout", "deploy-canary", "--spec", str(spec_file), "--run-dir", str(run_dir)],
                lambda: any(e["action"] == "broker restarted" for e in rollout.audit.entries()), 180,
                "the first canary broker restarted by the worker")

    resumed = Rollout(load_spec(spec_file), run_dir)
    assert resumed.state.record.steps["deploy-canary"].status == "running"  # the crash left it unfinished
    result = run_all(BROKER, resumed)

    assert result.outcome == "ROLLBACK"
    assert resumed.state.record.steps["deploy-canary"].attempts == 2
    first, second = attempts(resumed, "deploy-canary")
    finished_first = {e["broker"] for e in first if e["action"] == "broker restarted"}
    restarted_second = [e["broker"] for e in second if e["action"] == "restart broker"]
    assert 2 in finished_first
    assert not finished_first & set(restarted_second)  # a finished restart is never repeated
    assert len(restarted_second) <= 1  # at most the one the kill interrupted, or the one not reached
    assert {2, 3} <= {e["broker"] for e in first + second if e["action"] == "broker restarted"}
    assert snapshot(baseline_cluster) == before


def attempts(rollout: Rollout, step: str) -> list[list[dict]]:
    """The audit entries of each attempt of `step`."""
    runs: list[list[dict]] = []
    for e in rollout.audit.entries():
        if e["step"] == step:
            if e["action"] == "step started":
                runs.append([])
            runs[-1].append(e)
    return runs
