"""A warm-up waits while restarted brokers move towards serving (canary.rollout.broker.recovery), and gives up when
they stop moving (canary.kafka.wait.wait_until's `moving`)."""

from __future__ import annotations

import pytest

from canary.broker_metrics.catalogue import RECOVERY
from canary.broker_metrics.sources import BrokerSample, ExporterSource, parse_exposition
from canary.kafka import wait
from canary.rollout.broker import recovery
from canary.rollout.broker.recovery import Recovery

# As the JMX exporter shows KIP-831's gauges of a broker recovering two log directories with two threads each.
RECOVERING = """# TYPE kafka_log_logmanager_value untyped
kafka_log_logmanager_value{name="remainingLogsToRecover",dir="/data/a",} 40.0
kafka_log_logmanager_value{name="remainingLogsToRecover",dir="/data/b",} 2.0
kafka_log_logmanager_value{name="remainingSegmentsToRecover",dir="/data/a",threadNum="0",} 300.0
kafka_log_logmanager_value{name="remainingSegmentsToRecover",dir="/data/a",threadNum="1",} 12.0
"""


def test_the_recovery_gauges_are_summed_over_directories_and_threads():
    series = parse_exposition(RECOVERING)
    logs, segments = RECOVERY
    assert ExporterSource._reading(logs, series, None, 1.0) == 42.0
    assert ExporterSource._reading(segments, series, None, 1.0) == 312.0
    assert ExporterSource._reading(logs, parse_exposition("up 1\n"), None, 1.0) is None  # recovered: gone


def test_a_wait_goes_on_while_it_moves_and_gives_up_once_it_stops(clock):
    looks = iter([f"broker 4 not yet in the ISR of {n} partition(s)" for n in (90, 80, 80, 70, 60, 50)])
    last = ["?"]

    def check() -> str:
        last[0] = next(looks, last[0])
        return last[0]
    seen: set[str] = set()

    def moving(missing: str) -> bool:
        new = missing not in seen
        seen.add(missing)
        return new
    with pytest.raises(wait.WaitTimeout, match=r"no progress for 3s \(\d+s in all\): .* 50 partition"):
        wait.wait_until("learner warm-up", 3, check, moving=moving, poll=2)
    assert clock.now > 3 * 2  # longer than the timeout: it kept moving
    with pytest.raises(wait.WaitTimeout, match="not done after 3s"):  # without `moving`, the timeout is the bound
        wait.wait_until("learner warm-up", 3, lambda: "broker 4 not registered yet", poll=2)


class FakeSource:
    def __init__(self, sums: list[dict[int, tuple[float, float]]]):
        self.sums = sums
        self.asked: list[str] = []

    def only(self, metrics) -> FakeSource:
        self.asked = [m.name for m in metrics]
        return self

    def sample(self) -> list[BrokerSample]:
        now = self.sums.pop(0) if len(self.sums) > 1 else self.sums[0]
        return [BrokerSample(b, name, value, 0) for b, pair in now.items()
                for name, value in zip(("logs_to_recover", "segments_to_recover"), pair, strict=True)]


def test_a_recovering_broker_shows_what_it_has_left_and_each_step_down_is_progress(clock):
    source = FakeSource([{4: (40.0, 300.0), 5: (1.0, 1.0)}, {4: (30.0, 200.0)}, {4: (30.0, 200.0)}])
    r = Recovery(source, [4])
    assert source.asked == ["logs_to_recover", "segments_to_recover"]
    first = r.describe("broker 4 not registered yet")
    assert first == "broker 4 not registered yet (recovering its logs: 40 log(s), 300 segment(s) left)"
    assert r.moved(first) and not r.moved(first)
    clock.now += recovery.CHECK_EVERY
    second = r.describe("broker 4 not registered yet")
    assert "30 log(s), 200 segment(s) left" in second and r.moved(second)
    clock.now += recovery.CHECK_EVERY
    assert not r.moved(r.describe("broker 4 not registered yet"))  # no step down: not progress
    assert r.describe("broker 4 not yet in the ISR of 3 partition(s)").endswith("3 partition(s)")  # registered
    assert not r.moved("cluster not answering: TimeoutError") and not r.moved("cluster not answering: TimeoutError")
    assert Recovery(None, [4]).describe("broker 4 not registered yet") == "broker 4 not registered yet"
