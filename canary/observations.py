"""The observation: one record of what a probe or an instrumented client saw (docs/design.md).

Shared contract between the producers of observations (probe, lane-aware clients) and their
reader (the Spark analysis). Serialized as one JSON object per record; `schema` versions it.
Times are milliseconds since the epoch (wall clock of the observing process), with a fraction down to the
microsecond where the observer measured one: at a p50 of 3 ms a whole millisecond is a third of the value.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import BinaryIO, Literal

from canary.errors import CanaryError
from canary.files import InputFileError, bounded_lines, regular_file, shown_path

SCHEMA_VERSION = 1
OBSERVATIONS_TOPIC = "__kafka_canary_observations"
# A probe's record is a few hundred bytes; anything this big is not an observation and is not parsed.
MAX_RECORD_BYTES = 64 * 1024
# Observers' clocks may run a little ahead of the analysing machine's; a time beyond this is wrong, not skewed.
FUTURE_SLACK_MS = 5 * 60_000

Lane = Literal["canary", "baseline"]
LANES: tuple[Lane, ...] = ("canary", "baseline")
Kind = Literal["probe", "client"]
BROKER_KIND = "broker"   # a BrokerReading's kind

# What happened to one message, as far as the observer can tell.
OUTCOMES: tuple[str, ...] = (
    "delivered",       # acknowledged and received once, in order
    "produce_error",   # not acknowledged (error or timeout)
    "lost",            # acknowledged, never received within the round-trip SLA (or skipped by a gap)
    "duplicate",       # received more than once
    "out_of_order",    # received after a later sequence number of the same producer and partition
    "consume_error",   # the consumer failed to read or decode it
    "processing_error",  # client observations: the service failed to process it
)
# Not an outcome but an event a rate metric may count: a record a service processed and wrote nothing for (its
# observation's `outputs` is 0; canary.clients.outputs).
NO_OUTPUT = "no_output"


class ObservationsFileError(CanaryError):
    """An observations file that cannot be read (a device, a pipe, a directory)."""


class BadObservation(ValueError):
    """A record that cannot be used; `reason` is the exclusion reason the verdict counts (the Spark job's
    `bad_reason`): malformed, schema_version, unknown_lane, unknown_outcome, oversize, future_timestamp."""

    def __init__(self, reason: str, text: str):
        super().__init__(text)
        self.reason = reason


_INTS = ("partition", "seq")
_OPTIONAL_INTS = ("leader", "lag", "outputs")
_OPTIONAL_TIMES = ("ack_ts", "receive_ts")
_STRINGS = ("run_id", "kind", "source", "topic", "lane", "producer_id", "message_id", "outcome")


@dataclass(frozen=True)
class Observation:
    run_id: str            # one probe run or client rollout
    kind: Kind
    source: str            # probe instance or service instance that observed it
    topic: str
    partition: int
    leader: int | None     # leader broker at send time
    lane: Lane             # probe: the partition's lane at send time (its leader's); client: the instance's lane
    producer_id: str
    message_id: str        # unique per producer
    seq: int               # per producer and partition, from 0
    send_ts: float          # ms since the epoch
    ack_ts: float | None
    receive_ts: float | None
    outcome: str
    error: str | None = None
    processing_ms: float | None = None  # client observations
    lag: int | None = None               # client observations: consumer lag in records
    outputs: int | None = None           # client observations: records the service produced while processing it
    schema: int = SCHEMA_VERSION

    @property
    def produce_latency_ms(self) -> float | None:
        return None if self.ack_ts is None else self.ack_ts - self.send_ts

    @property
    def e2e_latency_ms(self) -> float | None:
        return None if self.receive_ts is None else self.receive_ts - self.send_ts

    def to_json(self) -> bytes:
        return json.dumps(asdict(self), separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, raw: bytes | str) -> Observation:
        """Parses one record; raises BadObservation (a ValueError) naming what is wrong and why it is excluded
        (callers count and skip)."""
        return cls.from_dict(_json_object(raw))

    @classmethod
    def from_dict(cls, data: dict) -> Observation:
        names = {f.name for f in fields(cls)}
        missing = sorted(n for n in names if n not in data and n not in ("error", "processing_ms", "lag", "outputs"))
        if missing:
            raise BadObservation("malformed", f"observation lacks {missing}")
        wrong = [k for k in _INTS if not _is_int(data[k])] + [k for k in _OPTIONAL_INTS
                                                              if data.get(k) is not None and not _is_int(data[k])]
        wrong += [k for k in ("send_ts",) if not _is_time(data[k])]
        wrong += [k for k in _OPTIONAL_TIMES if data.get(k) is not None and not _is_time(data[k])]
        wrong += [k for k in _STRINGS if not isinstance(data[k], str)]
        if wrong:
            raise BadObservation("malformed", f"observation fields {wrong} have the wrong type")
        if data.get("schema") != SCHEMA_VERSION:
            raise BadObservation("schema_version", f"observation schema {data.get('schema')!r}, "
                                                   f"expected {SCHEMA_VERSION}")
        if data["lane"] not in LANES:
            raise BadObservation("unknown_lane", f"unknown lane {data['lane']!r}")
        if data["outcome"] not in OUTCOMES:
            raise BadObservation("unknown_outcome", f"unknown outcome {data['outcome']!r}")
        return cls(**{k: v for k, v in data.items() if k in names})


@dataclass(frozen=True)
class BrokerReading:
    """One broker metric's value at one moment, with the broker's lane then (canary.broker_metrics names the
    metrics). It travels with the observations (same topic and files, same run id) so the analysis compares the
    brokers of the two lanes over the same time buckets as the probe's messages."""

    run_id: str
    source: str            # the sampler that read it
    broker: int
    lane: Lane
    metric: str            # a canary.broker_metrics catalogue name
    value: float
    ts: float              # ms since the epoch, when it was read
    kind: str = BROKER_KIND
    schema: int = SCHEMA_VERSION

    @property
    def send_ts(self) -> float:
        """The time a window selects records by (an observation's send time)."""
        return self.ts

    def to_json(self) -> bytes:
        return json.dumps(asdict(self), separators=(",", ":")).encode()

    @classmethod
    def from_dict(cls, data: dict) -> BrokerReading:
        missing = sorted(f.name for f in fields(cls) if f.name not in data)
        if missing:
            raise BadObservation("malformed", f"broker reading lacks {missing}")
        wrong = [k for k in ("broker",) if not _is_int(data[k])]
        wrong += [k for k in ("value", "ts") if not _is_time(data[k])]
        wrong += [k for k in ("run_id", "source", "lane", "metric") if not isinstance(data[k], str)]
        if wrong:
            raise BadObservation("malformed", f"broker reading fields {wrong} have the wrong type")
        if data["schema"] != SCHEMA_VERSION:
            raise BadObservation("schema_version", f"broker reading schema {data['schema']!r}, "
                                                   f"expected {SCHEMA_VERSION}")
        if data["lane"] not in LANES:
            raise BadObservation("unknown_lane", f"unknown lane {data['lane']!r}")
        return cls(**{f.name: data[f.name] for f in fields(cls)})


Record = Observation | BrokerReading


def parse_record(raw: bytes | str) -> Record:
    """One line of the observations topic or file: an Observation, or a BrokerReading (kind `broker`); raises
    BadObservation as Observation.from_json does."""
    data = _json_object(raw)
    return BrokerReading.from_dict(data) if data.get("kind") == BROKER_KIND else Observation.from_dict(data)


def _json_object(raw: bytes | str) -> dict:
    if len(raw) > MAX_RECORD_BYTES:
        raise BadObservation("oversize", f"record of {len(raw)} bytes, at most {MAX_RECORD_BYTES} allowed")
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError) as exc:  # RecursionError: arrays nested thousands deep
        raise BadObservation("malformed", f"not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise BadObservation("malformed", "observation is not a JSON object")
    return data


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_time(value) -> bool:
    """Milliseconds: a whole or fractional number, finite (JSON allows no NaN, Python's reader does)."""
    return (_is_int(value) and abs(value) < 2**53) or (isinstance(value, float) and math.isfinite(value))


def read_observations(lines: Iterable[str | bytes], now_ms: int | None = None
                      ) -> tuple[list[Record], dict[str, int]]:
    """Observations and broker readings from JSON lines, and the count of excluded records per reason (the Spark
    job's reasons): unreadable ones, and ones with a time after `now_ms` (default: now) beyond FUTURE_SLACK_MS."""
    limit = (int(time.time() * 1000) if now_ms is None else now_ms) + FUTURE_SLACK_MS
    parsed: list[Record] = []
    bad: dict[str, int] = {}
    for line in lines:
        if not line.strip():
            continue
        try:
            o = parse_record(line)
        except BadObservation as exc:
            bad[exc.reason] = bad.get(exc.reason, 0) + 1
            continue
        if max(_times(o)) > limit:
            bad["future_timestamp"] = bad.get("future_timestamp", 0) + 1
            continue
        parsed.append(o)
    return parsed, bad


def _times(record: Record) -> list[float]:
    if isinstance(record, BrokerReading):
        return [record.ts]
    return [t for t in (record.send_ts, record.ack_ts, record.receive_ts) if t is not None]


def read_file_counted(path: str | Path, now_ms: int | None = None) -> tuple[list[Record], dict[str, int]]:
    """A probe's observations file (JSON lines): the usable observations and the excluded records counted per
    reason, as the Spark job excludes them (read_observations). A missing file has no observations."""
    path = Path(path)
    if not path.exists():
        return [], {}
    try:  # a device (/dev/zero) or pipe would be read forever
        regular_file(path, "a JSON-lines observations file")
    except (OSError, InputFileError) as exc:
        raise ObservationsFileError(f"cannot read the observations file {shown_path(path)}: "
                                    f"{getattr(exc, 'strerror', None) or exc}") from None
    with open(path, "rb") as raw:
        return read_observations(_lines(raw), now_ms)


def _lines(raw: BinaryIO) -> Iterator[str | bytes]:
    """The file's lines as text; one over MAX_RECORD_BYTES is left as its first bytes (`oversize` then), and a file
    without line breaks is read piece by piece, never whole."""
    for line in bounded_lines(raw, MAX_RECORD_BYTES):
        yield line if len(line) > MAX_RECORD_BYTES else line.decode("utf-8", errors="replace")
