"""The roll's watch on a rolled broker's process: a broker that died after its roll fails the roll at once."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from canary.rollout.broker.rolling import ProcessWatch
from canary.rollout.core import RolloutError


def watch(answers: list[bool | None], cause: str | None = None) -> ProcessWatch:
    """A watch whose deployer gives `answers` in turn, asked on every check (no waiting between checks), and
    `cause` as the broker's own reason for stopping."""
    deployer = SimpleNamespace(process_running=lambda broker_id: answers.pop(0), exit_cause=lambda broker_id: cause)
    found = ProcessWatch(SimpleNamespace(deployer=deployer), 2, started=0.0)
    found.CHECK_EVERY = 0.0
    return found


def test_a_broker_reported_stopped_twice_in_a_row_fails_the_roll_naming_it():
    w = watch([False, False])
    w.check()   # one answer may be a supervisor restarting it
    with pytest.raises(RolloutError, match="broker 2 stopped after its roll: the deployer reports its process not "
                                           "running"):
        w.check()


def test_the_roll_fails_with_the_broker_s_own_words_when_its_log_has_them():
    w = watch([False, False], cause="java.lang.IllegalArgumentException: requirement failed: replica.socket."
                                    "timeout.ms should always be at least replica.fetch.wait.max.ms")
    w.check()
    with pytest.raises(RolloutError, match=r"started; its log says: java.lang.IllegalArgumentException: requirement "
                                           r"failed: replica.socket.timeout.ms should always be at least"):
        w.check()


def test_a_broker_that_runs_again_or_a_deployer_that_cannot_tell_never_fails_the_roll():
    w = watch([False, True, False, None, False, True])
    for _ in range(6):
        w.check()


def test_the_deployer_is_asked_only_every_few_seconds():
    asked = []
    deployer = SimpleNamespace(process_running=lambda broker_id: asked.append(broker_id) or False)
    w = ProcessWatch(SimpleNamespace(deployer=deployer), 3, started=0.0)
    for _ in range(100):
        w.check()
    assert asked == []   # within CHECK_EVERY of the roll: not asked yet
