"""A control broker's roll must restart it (canary.rollout.broker.restarted): its JVM's start time, read from its
metrics before and after the roll, is the proof; a roll that left the process running fails the step."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from canary.broker_metrics import BrokerMetricsError, BrokerSample
from canary.rollout.broker import restarted
from canary.rollout.broker.restarted import NotRestarted, RestartCheck

BEFORE = 1_795_000_000.0


class StartTimes:
    """Broker 2's process start time at each read, the last one repeated; None: its metrics do not say; an exception
    is raised."""

    def __init__(self, *reads: float | None | Exception):
        self.reads = list(reads)
        self.asked: tuple[list[str], list[int]] | None = None

    def only(self, metrics, brokers=None) -> StartTimes:
        self.asked = [m.series for m in metrics], list(brokers)
        return self

    def check(self) -> None:
        if isinstance(self.reads[0], Exception):
            raise self.reads[0]

    def sample(self) -> list[BrokerSample]:
        now = self.reads.pop(0) if len(self.reads) > 1 else self.reads[0]
        if isinstance(now, Exception):
            raise now
        return [BrokerSample(1, "process_start_time_s", 1.0, 0)] + (
            [] if now is None else [BrokerSample(2, "process_start_time_s", now, 0)])


def check_with(monkeypatch, source: StartTimes | None, after_roll: StartTimes | None = None
               ) -> tuple[RestartCheck, list]:
    """A check made before the roll, reading `source`; where the deployer says the metrics are after it:
    `after_roll`, else the same source."""
    audited: list = []
    sources = iter([source, after_roll or source])
    monkeypatch.setattr(restarted, "broker_metrics_source", lambda run: next(sources))
    run = SimpleNamespace(step="deploy-canary", progress=None,
                          audit=SimpleNamespace(record=lambda step, what, **kw: audited.append((what, kw))))
    return RestartCheck(run, 2), audited  # type: ignore[arg-type]


def test_a_later_start_time_confirms_the_restart_even_when_the_metrics_show_it_late(monkeypatch, clock):
    source = StartTimes(BEFORE, BEFORE, BEFORE, None, BEFORE + 40)  # as a Prometheus that had not scraped it yet
    check, audited = check_with(monkeypatch, source)
    assert source.asked == (["process_start_time_seconds"], [2]) and check.before == BEFORE  # that broker alone
    assert check.confirm() == "2026-11-18T11:07:20Z"  # when the new process started
    assert audited == [] and 0 < clock.now < restarted.OLD_SHOWS_FOR_S["agent"]


def test_a_restarted_broker_whose_metrics_answer_late_is_waited_for_not_taken_for_unconfirmed(monkeypatch, clock):
    # A fresh JVM's agent on a loaded machine: no answer for a while after the broker registered, then the new time.
    late = restarted.OLD_SHOWS_FOR_S["agent"] + 20
    check, audited = check_with(monkeypatch, StartTimes(BEFORE, *[None] * int(late), BEFORE + 40))
    assert check.confirm() == "2026-11-18T11:07:20Z"
    assert audited == [] and late <= clock.now < restarted.ANSWERS_WITHIN_S


def test_the_start_time_is_read_where_the_metrics_are_after_the_roll(monkeypatch, clock):
    # The roll gave the agent another port (the old one was taken while the broker was down): the old address never
    # answers again, and reading it would leave the restart unconfirmed.
    old_port = StartTimes(BEFORE, BrokerMetricsError("connection refused"))
    check, audited = check_with(monkeypatch, old_port, after_roll=StartTimes(BEFORE + 40))
    assert check.confirm() == "2026-11-18T11:07:20Z"
    assert audited == [] and clock.now < restarted.OLD_SHOWS_FOR_S["agent"]


def test_a_roll_that_left_the_process_running_fails_the_step_and_says_what_to_fix(monkeypatch, clock):
    check, audited = check_with(monkeypatch, StartTimes(BEFORE))
    with pytest.raises(NotRestarted) as err:
        check.confirm()
    message = str(err.value)
    assert message.startswith("broker 2 was not restarted: its process started at 2026-11-18T")
    assert "restart a broker even when its version and config are the ones it runs" in message
    assert "canary.control: none" in message
    # read again until the wait ran out, counted from its first answer
    assert restarted.OLD_SHOWS_FOR_S["agent"] <= clock.now < restarted.ANSWERS_WITHIN_S
    assert [what for what, _ in audited] == ["broker not restarted"]


@pytest.mark.parametrize("source", [None, StartTimes(None), StartTimes(BrokerMetricsError("down"))],
                         ids=["metrics-off", "no-start-time", "unreadable"])
def test_without_a_start_time_before_the_roll_there_is_nothing_to_check(monkeypatch, clock, source):
    check, audited = check_with(monkeypatch, source)
    assert check.before is None
    assert check.confirm() is None
    assert clock.now == 0 and audited == []


def test_a_start_time_unreadable_after_the_roll_is_audited_not_fatal(monkeypatch, clock):
    check, audited = check_with(monkeypatch, StartTimes(BEFORE, BrokerMetricsError("broker 2: cannot read its "
                                                                                    "metrics at http://…: Timeout")))
    assert check.confirm() is None
    assert clock.now >= restarted.ANSWERS_WITHIN_S
    assert [what for what, _ in audited] == ["restart not confirmed"]
    # and why: what the source says of its agent
    assert "do not say when its process started: broker 2: cannot read its metrics at http://…: Timeout" in \
        audited[0][1]["reason"]
