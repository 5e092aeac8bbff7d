"""The broker DAG's task per promotion wave (PromoteOperator with `wave`): each promotes up to its wave, one the plan
does not have is skipped, and so is every wave after a look that rolled the promotion back. On the in-memory
cluster of the rollout steps' tests."""

from __future__ import annotations

import pytest
from airflow.sdk.exceptions import AirflowSkipException
from kafka_canary_provider.operators.rollout import PromoteOperator

from canary.rollout.broker import promote
from canary.rollout.core import RunStatus

from ..fake_cluster import VirtualClock
from .test_steps import WAVES, Looks, six_in_batches


@pytest.fixture(autouse=True)
def clock(monkeypatch) -> VirtualClock:
    return VirtualClock(monkeypatch)


def task(wave: int) -> PromoteOperator:
    return PromoteOperator(task_id="promote" if wave == 1 else f"promote_wave_{wave}", wave=wave)


def test_each_wave_task_promotes_its_wave_and_one_the_plan_lacks_is_skipped(tmp_path, monkeypatch):
    cluster, run, _ = six_in_batches(tmp_path, promote=WAVES)
    monkeypatch.setattr(promote, "wave_look", Looks())
    assert task(1).run_step(run, {})["waves_done"] == 1 and cluster.rolls() == [1, 2]
    assert task(2).run_step(run, {})["waves_done"] == 2 and cluster.rolls() == [1, 2, 3]
    assert "controllers" in task(3).run_step(run, {}) and run.state.status == RunStatus.PROMOTED
    with pytest.raises(AirflowSkipException, match="3 wave"):
        task(4).run_step(run, {})


def test_the_waves_after_a_look_that_rolled_back_are_skipped(tmp_path, monkeypatch):
    cluster, run, _ = six_in_batches(tmp_path, promote=WAVES)
    monkeypatch.setattr(promote, "wave_look", Looks(regress_at=1))
    assert "regressed" in task(1).run_step(run, {}) and run.state.status == RunStatus.ROLLED_BACK
    rolls = list(cluster.rolls())
    with pytest.raises(AirflowSkipException, match="rolled back: the look after promotion wave 1"):
        task(2).run_step(run, {})
    assert cluster.rolls() == rolls
