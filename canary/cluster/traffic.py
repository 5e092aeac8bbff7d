"""Steady user traffic from Kafka's own performance tools: ProducerPerformance at a fixed rate into a user topic,
ConsumerPerformance reading it back, both in the background, so the brokers serve real clients while a rollout runs
(a light probe never loads a broker; leading user topics and the brokers' own metrics mean something only under
traffic).

    with UserTraffic(distribution.ensure("3.9.2"), bootstrap, TrafficSpec("orders", 1000, 1000, 8, 3), log_dir) as t:
        ...                       # t.check() raises TrafficError once a tool has died
    print(t.summary.line())      # what the producer reported last, what the consumer read, how each ended

Each tool is a JVM in its own process group, its output in `<log_dir>/<tool>.log`, its command line carrying the
marker of canary.process, so a sweep of `log_dir` finds one left behind. Only bootstrap servers and acks reach the
command line; a secured cluster's settings hold a password and would have to go to a 0600 `--producer.config` /
`--consumer.config` file (canary.cluster.security.java_client_config): not supported yet.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import signal
import subprocess
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from confluent_kafka import KafkaException
from confluent_kafka.admin import NewTopic

from canary import process
from canary.cluster.distribution import KafkaDistribution
from canary.errors import ClusterError
from canary.kafka.clients import admin_client

log = logging.getLogger(__name__)
T = TypeVar("T")

PRODUCER_MAIN = "org.apache.kafka.tools.ProducerPerformance"
CONSUMER_MAIN = "org.apache.kafka.tools.ConsumerPerformance"
# ProducerPerformance's summary at the end of its run (latency percentiles only there). The tool ends only after
# --num-records, and a SIGTERM skips it (exit 143), so the background traffic reports through its window lines.
PRODUCED = re.compile(r"(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, "
                      r"([\d.]+) ms max latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th")
# The line it prints every 5 s about the records acknowledged in that window (failed sends are not counted).
WINDOW = re.compile(r"^(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, "
                    r"([\d.]+) ms max latency\.\s*$")
# A failed send: the tool prints the exception of each record's callback.
_SEND_ERROR = re.compile(r"^org\.apache\.kafka\.\S+Exception: ")
# As run_tool's: a small heap and C1 only (C2 compiling costs a 2-core machine's brokers CPU for minutes); serial GC,
# so the two tool JVMs add no GC thread per core.
TOOL_JVM_OPTS = ["-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xshare:auto"]
# Long enough for any rollout: the tools run until stopped. No more: ProducerPerformance samples one latency in
# num-records / 500,000, so a far larger count would leave a final summary with almost no samples.
MAX_RUN_S = 24 * 3600
# A consumer that gets no record for this long gives up; broker restarts and rebalances pause it for seconds.
CONSUMER_IDLE_MS = 600_000
STOP_GRACE_S = 15.0


class TrafficError(ClusterError):
    """The traffic's topic could not be made, or one of its tools died."""


@dataclass(frozen=True)
class TrafficSpec:
    """What the traffic is: `records_per_s` records of `record_size` bytes in total into `topic`, made with
    `partitions` and `replication_factor` when missing."""

    topic: str
    records_per_s: int
    record_size: int
    partitions: int
    replication_factor: int

    @property
    def group(self) -> str:
        return f"kafka-canary-traffic-{self.topic}"

    def describe(self) -> str:
        return (f"{self.records_per_s:,} records/s of {self.record_size:,} B into {self.topic} ({self.partitions} "
                f"partitions, replication {self.replication_factor}, acks=all), read back by group {self.group}")


@dataclass(frozen=True)
class ProducerReport:
    """What ProducerPerformance reported: its last line's rate and latencies (percentiles only from a final
    summary), the records acknowledged over the whole run and the sends that failed."""

    records_per_s: float
    avg_ms: float
    max_ms: float
    acknowledged: int
    errors: int
    p50_ms: int | None = None
    p95_ms: int | None = None
    p99_ms: int | None = None


@dataclass(frozen=True)
class ConsumerReport:
    """What ConsumerPerformance reported last: records read so far and its rate over the last interval."""

    consumed: int
    records_per_s: float


@dataclass(frozen=True)
class ToolOutcome:
    """How one tool ended: `running`, `stopped` (by stop()), `killed` (it ignored SIGTERM for the grace), or
    `exited N` on its own, which for traffic meant to run until stopped is a death (`log_tail` then says why)."""

    tool: str
    state: str
    log: str
    log_tail: str = ""

    @property
    def died(self) -> bool:
        return self.state.startswith("exited")


@dataclass(frozen=True)
class TrafficSummary:
    """What the traffic's tools reported (None: nothing yet) and how each ended."""

    topic: str
    producer: ProducerReport | None
    consumer: ConsumerReport | None
    outcomes: tuple[ToolOutcome, ...]

    def line(self) -> str:
        """One line for a person: the producer's last rate and latencies, totals, how each tool ended."""
        parts = [f"user traffic on {self.topic}:"]
        if p := self.producer:
            parts.append(f"producer {p.records_per_s:,.0f} records/s at last (avg {p.avg_ms:.1f} ms, max "
                         f"{p.max_ms:.0f} ms), {p.acknowledged:,} acknowledged, {p.errors:,} failed;")
        else:
            parts.append("the producer reported nothing;")
        if c := self.consumer:
            parts.append(f"consumer read {c.consumed:,} ({c.records_per_s:,.0f}/s at last);")
        parts.append(", ".join(f"{o.tool} {o.state}" for o in self.outcomes))
        return " ".join(parts)


def parse_producer(lines: Iterable[str]) -> ProducerReport | None:
    """ProducerPerformance's output as a report; None before its first window line (it prints every 5 s)."""
    last: re.Match[str] | None = None
    acknowledged = errors = 0
    for line in lines:
        if m := WINDOW.match(line):
            last = m
            acknowledged += int(m[1])
        elif m := PRODUCED.search(line):
            last, acknowledged = m, int(m[1])  # the summary counts the whole run itself
        elif _SEND_ERROR.match(line):
            errors += 1
    if last is None:
        return None
    percentiles = [int(v) for v in last.groups()[5:8]] if last.re is PRODUCED else [None, None, None]
    return ProducerReport(float(last[2]), float(last[4]), float(last[5]), acknowledged, errors, *percentiles)


def parse_consumer(lines: Iterable[str]) -> ConsumerReport | None:
    """ConsumerPerformance's --show-detailed-stats output as a report; None before its first row. Columns are found
    by the header's names (`data.consumed.in.nMsg` counts the whole run, `nMsg.sec` the last interval)."""
    columns: list[str] = []
    last = None
    for line in lines:
        cells = [c.strip() for c in line.split(",")]
        if "data.consumed.in.nMsg" in cells:
            columns = cells
        elif columns and len(cells) == len(columns) and cells[0][:1].isdigit():
            row = dict(zip(columns, cells, strict=True))
            with contextlib.suppress(KeyError, ValueError):  # a log line that only looks like a row
                last = ConsumerReport(int(row["data.consumed.in.nMsg"]), float(row["nMsg.sec"]))
    return last


def log_tail(path: Path, lines: int = 15, max_bytes: int = 16_384) -> str:
    """The last `lines` lines of a log, read from its end (a tool's log can grow large under produce errors)."""
    try:
        with open(path, "rb") as f:
            f.seek(max(0, f.seek(0, os.SEEK_END) - max_bytes))
            return "\n".join(f.read().decode(errors="replace").splitlines()[-lines:])
    except FileNotFoundError:
        return ""


def ensure_topic(bootstrap_servers: str, spec: TrafficSpec, timeout: float = 30.0) -> bool:
    """Creates the spec's topic; False when it already existed (a harmless repeat: traffic goes to it as it is).
    Raises TrafficError naming the topic when the cluster refuses or does not answer within `timeout`."""
    admin = admin_client(bootstrap_servers)
    new = NewTopic(spec.topic, num_partitions=spec.partitions, replication_factor=spec.replication_factor)
    for name, future in admin.create_topics([new], operation_timeout=timeout, request_timeout=timeout).items():
        try:
            future.result(timeout=timeout)
        except KafkaException as exc:
            if exc.args[0].name() == "TOPIC_ALREADY_EXISTS":
                log.info("topic %s already exists; the traffic uses it as it is", name)
                return False
            raise TrafficError(f"creating the traffic topic {name} on {bootstrap_servers} failed: "
                               f"{exc.args[0].str()}") from exc
        except TimeoutError as exc:
            raise TrafficError(f"creating the traffic topic {name}: no answer from {bootstrap_servers} within "
                               f"{timeout:.0f}s; is the cluster up?") from exc
    return True


class BackgroundTool:
    """One command in its own process group, its output in `log` (a fresh file: the summary reads the whole of it);
    stopped with SIGTERM, then SIGKILL after a grace. The group is only signalled while the process is unreaped, so
    its id cannot belong to another."""

    def __init__(self, tool: str, cmd: list[str], log: Path):
        self.tool, self.log = tool, log
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "wb") as out:
            self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        self._ended_by: str | None = None  # "stopped" or "killed" once stop() had to end it

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stop(self, grace: float = STOP_GRACE_S) -> None:
        """Ends the tool (idempotent): SIGTERM, SIGKILL when it outlives `grace`."""
        if self.proc.poll() is not None:
            return
        self._signal(signal.SIGTERM)
        self._ended_by = "stopped"
        try:
            self.proc.wait(grace)
        except subprocess.TimeoutExpired:
            self._signal(signal.SIGKILL)
            self._ended_by = "killed"
            self.proc.wait(10)

    def _signal(self, sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, sig)

    def outcome(self) -> ToolOutcome:
        code = self.proc.poll()
        if code is None:
            return ToolOutcome(self.tool, "running", str(self.log))
        if self._ended_by:
            return ToolOutcome(self.tool, self._ended_by, str(self.log))
        return ToolOutcome(self.tool, f"exited {code}", str(self.log), log_tail(self.log))


class UserTraffic:
    """Steady traffic through one user topic from Kafka's own tools, as the module says. `start()` creates the topic
    when missing (raises TrafficError) and starts both tools; `check()` raises TrafficError once either has died, with
    the end of its log; `stop()` ends both and returns the summary (idempotent). As a context manager: started on
    entry, stopped on exit, the summary then in `summary`."""

    def __init__(self, dist: KafkaDistribution, bootstrap_servers: str, spec: TrafficSpec, log_dir: Path):
        self.dist, self.bootstrap_servers, self.spec, self.log_dir = dist, bootstrap_servers, spec, Path(log_dir)
        self._tools: list[BackgroundTool] = []
        self.summary: TrafficSummary | None = None

    def __enter__(self) -> UserTraffic:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def pids(self) -> list[int]:
        return [tool.pid for tool in self._tools]

    def start(self) -> UserTraffic:
        if self._tools:
            return self
        ensure_topic(self.bootstrap_servers, self.spec)
        try:
            self._start_tool("producer", PRODUCER_MAIN, self._producer_args())
            self._start_tool("consumer", CONSUMER_MAIN, self._consumer_args())
        except BaseException:
            self.stop()  # the producer must not outlive a consumer that failed to start
            raise
        return self

    def check(self) -> None:
        """Raises TrafficError naming each tool that exited by itself, with the end of its log."""
        dead = [o for o in (tool.outcome() for tool in self._tools) if o.died]
        if dead:
            raise TrafficError("; ".join(f"the traffic's {o.tool} on {self.spec.topic} {o.state}; the end of {o.log}:"
                                         f"\n{o.log_tail}" for o in dead))

    def stop(self) -> TrafficSummary:
        """Ends both tools (SIGTERM, SIGKILL after a grace) and returns what they reported and how each ended."""
        if self.summary is None or any(o.state == "running" for o in self.summary.outcomes):
            for tool in self._tools:
                tool.stop()
            self.summary = self._summarize()
        return self.summary

    def _start_tool(self, tool: str, main_class: str, args: list[str]) -> None:
        # canary.process's marker convention, so a sweep of the log directory (the test suite's) finds a tool left
        # behind by a process that died before stop().
        marker = f"{process.MARKER}{self.log_dir.resolve()}#traffic-{tool}"
        cmd = self.dist.java_command(main_class, args, [*TOOL_JVM_OPTS, marker])
        self._tools.append(BackgroundTool(tool, cmd, self.log_dir / f"{tool}.log"))

    def _producer_args(self) -> list[str]:
        spec = self.spec
        return ["--topic", spec.topic, "--num-records", str(spec.records_per_s * MAX_RUN_S),
                "--record-size", str(spec.record_size), "--throughput", str(spec.records_per_s),
                "--producer-props", f"bootstrap.servers={self.bootstrap_servers}", "acks=all"]

    def _consumer_args(self) -> list[str]:
        # From the latest offsets: a group new to an old topic reads along with the producer instead of first
        # racing through the backlog, which would be a burst, not steady traffic.
        spec = self.spec
        return ["--bootstrap-server", self.bootstrap_servers, "--topic", spec.topic, "--group", spec.group,
                "--messages", str(spec.records_per_s * MAX_RUN_S), "--timeout", str(CONSUMER_IDLE_MS),
                "--from-latest", "--show-detailed-stats", "--reporting-interval", "5000"]

    def _summarize(self) -> TrafficSummary:
        return TrafficSummary(self.spec.topic, _parsed(self.log_dir / "producer.log", parse_producer),
                              _parsed(self.log_dir / "consumer.log", parse_consumer),
                              tuple(tool.outcome() for tool in self._tools))


def _parsed(path: Path, parse: Callable[[Iterable[str]], T | None]) -> T | None:
    if not path.exists():  # the tool never started
        return None
    with open(path, errors="replace") as lines:
        return parse(lines)
