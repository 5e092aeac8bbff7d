"""The gate's own observations never depend on the canary accepting them: the observations topic is led by brokers
the change does not touch, the analysis reads the run's own observations file (never the topic), and a window whose
observations the gate lost is the gate's failure, rolled back and named so, not an INCONCLUSIVE that reads like the
change's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from canary.judge import ROLLBACK
from canary.observations import OBSERVATIONS_TOPIC
from canary.rollout.broker import verdict
from canary.rollout.broker.record import BrokerWindow
from canary.rollout.core import RunStatus
from canary.rollout.leaders import keep_leaders_off

from ..fake_cluster import FakeCluster, VirtualClock
from .test_steps import BASE, PROBE_TOPIC, deployed


@pytest.fixture(autouse=True)
def clock(monkeypatch) -> VirtualClock:
    return VirtualClock(monkeypatch)


@pytest.fixture
def cluster() -> FakeCluster:
    return FakeCluster.of(topics={PROBE_TOPIC: 3, OBSERVATIONS_TOPIC: 3, "orders": 6}, config=BASE)


def test_the_observations_topic_is_led_by_brokers_the_change_does_not_touch(cluster, tmp_path):
    run = deployed(cluster, tmp_path)
    observations = [p for (topic, _), p in cluster.parts.items() if topic == OBSERVATIONS_TOPIC]
    assert any(p.replicas[0] == 3 for p in observations)  # the canary, broker 3, preferred for one of them
    cluster.parts[(OBSERVATIONS_TOPIC, 0)].leader = 3  # and leading another after a failover
    assert keep_leaders_off(run, OBSERVATIONS_TOPIC, [3], 10.0) == []
    assert all(p.replicas[0] != 3 and p.leader != 3 for p in observations)
    assert all(sorted(p.replicas) == [1, 2, 3] for p in observations)  # reordered: no data moved
    untouched = [p for (topic, _), p in cluster.parts.items() if topic != OBSERVATIONS_TOPIC]
    assert any(p.replicas[0] == 3 for p in untouched)
    changes = len(cluster.changes)
    assert keep_leaders_off(run, OBSERVATIONS_TOPIC, [3], 10.0) == [] and len(cluster.changes) == changes


def _window(run, lines: list[str], sent: int = 120) -> Path:
    path = run.run_dir / "observations-window-1.jsonl"
    path.write_text("".join(line + "\n" for line in lines))
    run.state.update(window=BrokerWindow(
        attempt=1, start_ms=1_000, end_ms=61_000, probe_run_id="unit-window-1", observations=path.name,
        probe={"canary": {"sent": sent, "acked": 0}, "baseline": {"sent": sent, "acked": sent}}))
    return path


def test_a_window_whose_observations_the_gate_lost_is_rolled_back_as_the_gates_failure(cluster, tmp_path):
    run = deployed(cluster, tmp_path)
    run.step = "judge"
    _window(run, ["{not json", json.dumps({"schema": 1, "kind": "probe"})])
    decided = verdict.judge_window(run)
    assert decided["verdict"] == ROLLBACK and run.state.status is RunStatus.JUDGED_ROLLBACK
    assert decided["reason"].startswith("judge failed: the gate lost its own observations: the probe sent 240 "
                                        "message(s) in the window, but its observations file "
                                        "observations-window-1.jsonl holds no valid observation (")
    assert decided["reason"].endswith("the change was not judged")


def test_an_empty_window_without_probe_traffic_is_left_to_the_judge(cluster, tmp_path):
    run = deployed(cluster, tmp_path)
    path = _window(run, [], sent=0)
    assert verdict.lost_observations(run.record.window, path) is None


def test_the_analysis_reads_the_runs_own_observations_file_never_the_topic(cluster, tmp_path):
    run = deployed(cluster, tmp_path)
    path = _window(run, [])
    request = verdict.analysis_request(run)
    assert request["observations"] == str(path) and "kafka://" not in json.dumps(request)
