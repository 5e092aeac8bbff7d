"""The observation: one record of what a probe or an instrumented client saw (DESIGN.md §2).

Shared contract between the producers of observations (probe, lane-aware clients) and their
reader (the Spark analysis). Serialized as one JSON object per record; `schema` versions it.
Times are milliseconds since the epoch (wall clock of the observing process).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from typing import Literal

SCHEMA_VERSION = 1
OBSERVATIONS_TOPIC = "__kafka_canary_observations"

Lane = Literal["canary", "baseline"]
LANES: tuple[str, ...] = ("canary", "baseline")
Kind = Literal["probe", "client"]

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


@dataclass(frozen=True)
class Observation:
    run_id: str            # one probe run or client rollout
    kind: Kind
    source: str            # probe instance or service instance that observed it
    topic: str
    partition: int
    leader: int | None     # leader broker at send time
    lane: Lane             # the partition's lane at send time (its leader's lane)
    producer_id: str
    message_id: str        # unique per producer
    seq: int               # per producer and partition, from 0
    send_ts: int
    ack_ts: int | None
    receive_ts: int | None
    outcome: str
    error: str | None = None
    processing_ms: float | None = None  # client observations
    lag: int | None = None               # client observations: consumer lag in records
    schema: int = SCHEMA_VERSION

    @property
    def produce_latency_ms(self) -> int | None:
        return None if self.ack_ts is None else self.ack_ts - self.send_ts

    @property
    def e2e_latency_ms(self) -> int | None:
        return None if self.receive_ts is None else self.receive_ts - self.send_ts

    def to_json(self) -> bytes:
        return json.dumps(asdict(self), separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, raw: bytes | str) -> Observation:
        """Parses one record; raises ValueError naming what is wrong (callers count and skip)."""
        data = json.loads(raw)
        if not isinstance(data, dict):
            raise ValueError("observation is not a JSON object")
        if data.get("schema") != SCHEMA_VERSION:
            raise ValueError(f"observation schema {data.get('schema')!r}, expected {SCHEMA_VERSION}")
        names = {f.name for f in fields(cls)}
        missing = sorted(n for n in names if n not in data and n not in ("error", "processing_ms", "lag"))
        if missing:
            raise ValueError(f"observation lacks {missing}")
        if data["lane"] not in LANES:
            raise ValueError(f"unknown lane {data['lane']!r}")
        if data["outcome"] not in OUTCOMES:
            raise ValueError(f"unknown outcome {data['outcome']!r}")
        return cls(**{k: v for k, v in data.items() if k in names})
