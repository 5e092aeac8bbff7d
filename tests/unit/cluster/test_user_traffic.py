"""The user traffic's reports parsed from its tools' real output, and its processes' lifecycle with stand-in tools
(Python scripts where the Kafka tools would run)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from canary.cluster import traffic
from canary.cluster.distribution import KafkaDistribution
from canary.cluster.traffic import (
    BackgroundTool,
    ConsumerReport,
    ProducerReport,
    TrafficError,
    TrafficSpec,
    UserTraffic,
    parse_consumer,
    parse_producer,
)

# Kafka 3.9.2's ProducerPerformance, 300 records/s of 1 kB, stopped with SIGTERM (no final summary).
PRODUCER_WINDOWS = """\
1500 records sent, 299.6 records/sec (0.29 MB/sec), 241.5 ms avg latency, 1410.0 ms max latency.
1502 records sent, 300.3 records/sec (0.29 MB/sec), 2.8 ms avg latency, 24.0 ms max latency.
1501 records sent, 300.1 records/sec (0.29 MB/sec), 2.7 ms avg latency, 32.0 ms max latency.
"""
# Into partitions whose leader refuses the records (message.max.bytes below the record size).
PRODUCER_ERRORS = """\
[2026-11-26 12:32:03,944] WARN [Producer clientId=perf-producer-client] Got error produce response in correlation id 7 \
on topic-partition small-0, splitting and retrying (2147483647 attempts left). Error: MESSAGE_TOO_LARGE \
(org.apache.kafka.clients.producer.internals.Sender)
org.apache.kafka.common.errors.RecordTooLargeException: The request included a message larger than the max message \
size the server will accept.
org.apache.kafka.common.errors.RecordTooLargeException: The request included a message larger than the max message \
size the server will accept.
"""
PRODUCER_SUMMARY = ("50000 records sent, 2999.8 records/sec (1.43 MB/sec), 4.2 ms avg latency, 212.0 ms max latency, "
                    "3 ms 50th, 9 ms 95th, 31 ms 99th, 140 ms 99.9th.\n")
# Kafka 4.1.2's ConsumerPerformance --show-detailed-stats.
CONSUMER_ROWS = """\
time, threadId, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, rebalance.time.ms, fetch.time.ms, \
fetch.MB.sec, fetch.nMsg.sec
2026-11-26 12:31:51:685, 0, 1.2894, 0.2576, 1352, 270.0759, 454, 4552, 0.2833, 297.0123
2026-11-26 12:31:56:687, 0, 2.7199, 0.2860, 2852, 299.8800, 0, 5002, 0.2860, 299.8800
2026-11-26 12:32:01:690, 0, 4.1513, 0.2861, 4353, 300.0200, 0, 5003, 0.2861, 300.0200
"""


def test_window_lines_give_the_last_rate_and_the_whole_runs_acknowledged_records():
    report = parse_producer(PRODUCER_WINDOWS.splitlines())
    assert report == ProducerReport(records_per_s=300.1, avg_ms=2.7, max_ms=32.0, acknowledged=4503, errors=0)


def test_failed_sends_are_counted_and_never_taken_for_acknowledged_records():
    report = parse_producer((PRODUCER_WINDOWS + PRODUCER_ERRORS).splitlines())
    assert report is not None and report.errors == 2 and report.acknowledged == 4503


def test_a_final_summary_gives_its_own_count_and_the_percentiles():
    report = parse_producer((PRODUCER_WINDOWS + PRODUCER_SUMMARY).splitlines())
    assert report == ProducerReport(2999.8, 4.2, 212.0, acknowledged=50000, errors=0, p50_ms=3, p95_ms=9, p99_ms=31)


def test_the_summary_pattern_still_serves_the_capacity_bench():
    # bench/capacity_truth.py unpacks these eight groups.
    assert traffic.PRODUCED.findall(PRODUCER_SUMMARY) == [
        ("50000", "2999.8", "1.43", "4.2", "212.0", "3", "9", "31")]
    assert traffic.PRODUCED.findall(PRODUCER_WINDOWS) == []


def test_nothing_reported_yet_is_none():
    assert parse_producer(PRODUCER_ERRORS.splitlines()) is None
    assert parse_consumer(CONSUMER_ROWS.splitlines()[:1]) is None
    assert parse_consumer([]) is None


def test_consumer_rows_give_the_records_read_so_far_and_the_last_rate():
    assert parse_consumer(CONSUMER_ROWS.splitlines()) == ConsumerReport(consumed=4353, records_per_s=300.02)


def test_the_summary_line_says_rate_totals_and_how_each_tool_ended():
    summary = traffic.TrafficSummary("orders", parse_producer(PRODUCER_WINDOWS.splitlines()),
                                     parse_consumer(CONSUMER_ROWS.splitlines()),
                                     (traffic.ToolOutcome("producer", "stopped", "p.log"),
                                      traffic.ToolOutcome("consumer", "exited 1", "c.log", "boom")))
    assert summary.line() == ("user traffic on orders: producer 300 records/s at last (avg 2.7 ms, max 32 ms), 4,503 "
                              "acknowledged, 0 failed; consumer read 4,353 (300/s at last); producer stopped, "
                              "consumer exited 1")


def _python(tmp_path: Path, name: str, code: str) -> list[str]:
    script = tmp_path / f"{name}.py"
    script.write_text(code)
    return [sys.executable, str(script)]


def test_a_tool_that_exits_by_itself_died_and_its_log_says_why(tmp_path):
    tool = BackgroundTool("consumer", _python(tmp_path, "dies", "print('no such topic'); raise SystemExit(3)"),
                          tmp_path / "consumer.log")
    tool.proc.wait(30)
    outcome = tool.outcome()
    assert outcome.state == "exited 3" and outcome.died and "no such topic" in outcome.log_tail


def test_stop_ends_a_tool_and_kills_one_that_ignores_sigterm(tmp_path):
    polite = BackgroundTool("producer", _python(tmp_path, "sleeps", "import time; time.sleep(60)"), tmp_path / "p.log")
    stubborn = BackgroundTool("consumer", _python(tmp_path, "stubborn", (
        "import signal, sys, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nprint('ready', flush=True)\n"
        "time.sleep(60)\n")), tmp_path / "c.log")
    assert polite.outcome().state == "running"
    deadline = time.monotonic() + 30
    while "ready" not in (tmp_path / "c.log").read_text():  # SIGTERM is ignored only from here on
        assert stubborn.proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.01)
    polite.stop()
    stubborn.stop(grace=0.5)
    assert (polite.outcome().state, stubborn.outcome().state) == ("stopped", "killed")
    assert not polite.outcome().died and not stubborn.outcome().died
    polite.stop()  # a repeat changes nothing
    assert polite.outcome().state == "stopped"


def _wait_for(condition, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


class _StandInTools(KafkaDistribution):
    """Runs a Python script per Kafka tool: the producer prints window lines until stopped, the consumer dies."""

    def java_command(self, main_class: str, args: list[str], jvm_opts: list[str] | None = None,
                     tool: bool = True) -> list[str]:
        if main_class == traffic.PRODUCER_MAIN:
            code = f"import time\nprint({PRODUCER_WINDOWS!r}, flush=True)\ntime.sleep(60)\n"
        else:
            code = "print('TimeoutException: no records for 600000 ms', flush=True); raise SystemExit(1)"
        script = self.libs / f"{main_class.rsplit('.', 1)[1]}.py"
        script.write_text(code)
        return [sys.executable, str(script), *(jvm_opts or [])]  # the marker stays on the command line


def test_user_traffic_says_when_a_tool_died_and_stops_the_other(tmp_path, monkeypatch):
    monkeypatch.setattr(traffic, "ensure_topic", lambda *a: True)
    spec = TrafficSpec("orders", 1000, 1000, 8, 3)
    user = UserTraffic(_StandInTools("3.9.2", tmp_path, "maven"), "127.0.0.1:9092", spec, tmp_path / "traffic")
    died = r"(?s)consumer on orders exited 1; the end of .*consumer.log:\nTimeoutException: no records"
    with user:
        _wait_for(lambda: "records sent" in (tmp_path / "traffic" / "producer.log").read_text())
        with pytest.raises(TrafficError, match=died):
            _wait_for(lambda: user.check())
    summary = user.summary
    assert summary is not None and summary.producer is not None and summary.producer.acknowledged == 4503
    assert [(o.tool, o.state) for o in summary.outcomes] == [("producer", "stopped"), ("consumer", "exited 1")]
    assert user.stop() is summary  # idempotent
