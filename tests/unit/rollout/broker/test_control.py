"""The control brokers: which ones preflight takes, and a retried deploy step restarting only what it had not."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from canary.rollout.broker import control
from canary.rollout.broker.spec import load_spec
from canary.rollout.core import RolloutError


def run_for(control_field="auto", metrics=True, restarted=(), ids=(1, 2, 3)) -> SimpleNamespace:
    spec = load_spec({"cluster": {"dir": "/c"}, "change": {"config": {"num.io.threads": "6"}},
                      "canary": {"count": 1, "control": control_field}, "broker_metrics": {"enabled": metrics}})
    record = SimpleNamespace(control_brokers=list(ids), control_restarted=list(restarted))
    state = SimpleNamespace(record=record, update=lambda **kw: record.__dict__.update(kw))
    return SimpleNamespace(spec=spec, state=state, control_ids=lambda: record.control_brokers)


@pytest.mark.parametrize("asked, metrics, ids, canaries, chosen", [
    ("auto", True, [1, 2, 3], [3], [2]),          # the highest id that is not a canary; broker 1 stays untouched
    ("auto", True, [1, 2, 3, 4, 5, 6], [6], [5]),
    ("auto", True, [1, 2], [2], []),              # no broker to spare: the canary is judged against broker 1 as is
    ("auto", False, [1, 2, 3], [3], []),          # no broker metrics, nothing a control is compared in
    ("none", True, [1, 2, 3], [3], []),
    ([1], True, [1, 2, 3], [3], [1]),
])
def test_preflight_takes_a_control_broker_when_the_cluster_has_one_to_spare(asked, metrics, ids, canaries, chosen):
    assert control.choose_control(run_for(asked, metrics), ids, canaries) == chosen


@pytest.mark.parametrize("asked, message", [
    ([7], r"canary.control: \[7\] are not brokers of this cluster; its broker ids are \[1, 2, 3\]"),
    ([3], r"canary.control: brokers \[3\] are canary brokers"),
    ([1, 2], r"leave no broker untouched to compare with before the change; choose at most 1 control broker"),
])
def test_a_control_list_preflight_cannot_honour_is_refused_before_any_change(asked, message):
    with pytest.raises(RolloutError, match=message):
        control.choose_control(run_for(asked), [1, 2, 3], [3])


def test_a_retried_deploy_step_restarts_only_the_control_brokers_it_had_not(monkeypatch):
    rolled = []
    monkeypatch.setattr(control, "roll_broker", lambda run, broker_id, phase, warm: rolled.append(
        (broker_id, phase)) or {"broker": broker_id, "phase": phase})
    run = run_for(ids=(1, 2), restarted=(1,))
    assert control.restart_controls(run) == [{"broker": 2, "phase": "control"}]
    assert rolled == [(2, "control")] and run.state.record.control_restarted == [1, 2]
    assert control.restart_controls(run) == [] and rolled == [(2, "control")]
