"""Per-partition sequence tracking: what happened to every message this probe sent.

Each probe process has a producer id and a random `epoch`; it tracks only records carrying both,
so several probes share one topic without touching each other's counts (foreign records are
counted as such), and a restarted probe never counts its predecessor's messages as lost.

Outcomes (canary.observations.OUTCOMES), each written as one observation:
- delivered: acknowledged and received once, in order;
- out_of_order: received after a later sequence number of the same partition;
- lost: acknowledged, then skipped (the consumer passed its offset without seeing it: a gap),
  or not received within the round-trip SLA after send;
- produce_error: the producer reported a failure (error or message timeout);
- duplicate: an extra observation for each further receipt of an already received message.
A message received after it was declared lost (or failed) counts as `late`, never as delivered.
An acknowledged message is only ever lost by a gap or by the SLA, never by the probe stopping:
at the end, whatever is still in flight is reported as unresolved.

The tracker is pure (no Kafka, time passed in as wall-clock ms) and thread-safe.
"""

from __future__ import annotations

import heapq
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from canary.observations import Observation
from canary.probe.message import MalformedMessage, ProbeMessage, decode
from canary.probe.stats import Ledger


class ProbeEvents(Protocol):
    """What the tracker tells the metrics (canary.probe.metrics.ProbeMetrics implements it)."""

    def sent(self, partition: int, leader: int | None, lane: str) -> None: ...
    def acked(self, partition: int, leader: int | None, lane: str, latency_ms: float) -> None: ...
    def produce_error(self, partition: int, leader: int | None, lane: str) -> None: ...
    def received(self, partition: int, leader: int | None, lane: str, latency_ms: float) -> None: ...
    def outcome(self, partition: int, leader: int | None, lane: str, outcome: str) -> None: ...
    def consume_error(self, partition: int | None) -> None: ...
    def foreign(self, partition: int) -> None: ...


class _Sent:
    __slots__ = ("seq", "send_ms", "leader", "lane", "ack_ms", "offset", "receive_ms", "outcome")

    def __init__(self, seq: int, send_ms: float, leader: int | None, lane: str):
        self.seq, self.send_ms, self.leader, self.lane = seq, send_ms, leader, lane
        self.ack_ms: float | None = None
        self.offset: int | None = None
        self.receive_ms: float | None = None
        self.outcome: str | None = None


@dataclass
class _Stream:
    next_seq: int = 0
    pending: dict[int, _Sent] = field(default_factory=dict)
    acked_offsets: list[tuple[int, int]] = field(default_factory=list)  # heap of (offset, seq)
    max_received: int = -1
    done: OrderedDict[int, tuple[str, float, _Sent]] = field(default_factory=OrderedDict)


@dataclass(frozen=True)
class TrackerIdentity:
    run_id: str
    topic: str
    producer_id: str
    epoch: str


class Tracker:
    def __init__(self, identity: TrackerIdentity, rtt_sla_ms: float, emit: Callable[[Observation], None],
                 events: ProbeEvents | None = None, ledger: Ledger | None = None):
        self.id = identity
        self.rtt_sla_ms = rtt_sla_ms
        self.emit = emit
        self.events = events
        self.ledger = ledger or Ledger()
        self.foreign_records = 0
        self.malformed_records = 0
        self._streams: dict[int, _Stream] = {}
        self._lock = threading.Lock()
        self._memory_ms = rtt_sla_ms + 30_000  # how long finished messages are remembered (duplicates)

    # ----- producer side -----

    def next_message(self, partition: int, leader: int | None, lane: str, now_ms: float) -> ProbeMessage:
        """Registers a message about to be sent and returns it."""
        with self._lock:
            stream = self._streams.setdefault(partition, _Stream())
            seq = stream.next_seq
            stream.next_seq += 1
            stream.pending[seq] = _Sent(seq, now_ms, leader, lane)
            self.ledger.count(now_ms, lane, partition, "sent")
        if self.events:
            self.events.sent(partition, leader, lane)
        return ProbeMessage(self.id.producer_id, self.id.epoch, self.id.run_id, partition, seq, int(now_ms),
                            leader, lane)

    def acked(self, partition: int, seq: int, offset: int, now_ms: float, client_latency_ms: float | None = None
              ) -> None:
        """`client_latency_ms`: the client's own time from the send to the broker's response, when it has one; it
        leaves out how long this process took to serve the report (a busy machine's scheduling, not the broker)."""
        with self._lock:
            stream = self._streams.get(partition)
            sent = stream.pending.get(seq) if stream else None
            if stream is None or sent is None or sent.ack_ms is not None:
                return
            latency = now_ms - sent.send_ms if client_latency_ms is None else min(client_latency_ms,
                                                                                   now_ms - sent.send_ms)
            sent.ack_ms, sent.offset = sent.send_ms + latency, offset
            self.ledger.count(now_ms, sent.lane, partition, "acked")
            self.ledger.latency(now_ms, sent.lane, partition, "produce", latency)
            if sent.receive_ms is not None:  # the consumer was quicker than the delivery report
                self._finish(stream, partition, sent, sent.outcome or "delivered", now_ms)
            else:
                heapq.heappush(stream.acked_offsets, (offset, seq))
        if self.events:
            self.events.acked(partition, sent.leader, sent.lane, latency)

    def failed(self, partition: int, seq: int, error: str, now_ms: float) -> None:
        with self._lock:
            stream = self._streams.get(partition)
            sent = stream.pending.get(seq) if stream else None
            if stream is None or sent is None:
                return
            if sent.receive_ms is not None:  # written although the report says failed
                self._finish(stream, partition, sent, sent.outcome or "delivered", now_ms,
                             error=f"reported failed but received: {error}")
                return
            self.ledger.count(now_ms, sent.lane, partition, "produce_errors")
            self._finish(stream, partition, sent, "produce_error", now_ms, error=error)
        if self.events:
            self.events.produce_error(partition, sent.leader, sent.lane)

    # ----- consumer side -----

    def record(self, partition: int, offset: int, value: bytes | None, now_ms: float) -> str:
        """One consumed record of the canary topic; returns what it was: 'own', 'duplicate', 'late',
        'foreign' or 'malformed'. Never raises for bad input."""
        try:
            msg = decode(value)
        except MalformedMessage:
            msg = None
        with self._lock:
            stream = self._streams.get(partition)
            if stream is not None:
                self._advance(stream, partition, offset, now_ms)
            if msg is None:
                self.malformed_records += 1
                kind = "malformed"
            elif msg.producer_id != self.id.producer_id or msg.epoch != self.id.epoch or stream is None \
                    or msg.partition != partition or not 0 <= msg.seq < stream.next_seq:
                self.foreign_records += 1
                kind = "foreign"
            else:
                kind = self._own(stream, partition, msg.seq, now_ms)
        if self.events:
            if kind == "malformed":
                self.events.consume_error(partition)
            elif kind == "foreign":
                self.events.foreign(partition)
        return kind

    def consume_error(self, partition: int | None) -> None:
        if self.events:
            self.events.consume_error(partition)

    def _own(self, stream: _Stream, partition: int, seq: int, now_ms: float) -> str:
        sent = stream.pending.get(seq)
        if sent is not None and sent.receive_ms is None:
            sent.receive_ms = now_ms
            sent.outcome = "out_of_order" if seq < stream.max_received else "delivered"
            stream.max_received = max(stream.max_received, seq)
            self.ledger.count(now_ms, sent.lane, partition, "received")
            self.ledger.latency(now_ms, sent.lane, partition, "e2e", now_ms - sent.send_ms)
            if self.events:
                self.events.received(partition, sent.leader, sent.lane, now_ms - sent.send_ms)
            if sent.ack_ms is not None:
                self._finish(stream, partition, sent, sent.outcome, now_ms)
            return "own"
        if sent is not None:  # received twice before its acknowledgement came
            self._duplicate(partition, sent, now_ms)
            return "duplicate"
        done = stream.done.get(seq)
        if done is not None and done[0] in ("delivered", "out_of_order"):
            self._duplicate(partition, done[2], now_ms)
            return "duplicate"
        lane = done[2].lane if done else "baseline"
        self.ledger.count(now_ms, lane, partition, "late")
        return "late"

    def _duplicate(self, partition: int, sent: _Sent, now_ms: float) -> None:
        self.ledger.count(now_ms, sent.lane, partition, "duplicated")
        self._observe(partition, sent, "duplicate", receive_ms=now_ms)
        if self.events:
            self.events.outcome(partition, sent.leader, sent.lane, "duplicate")

    def _advance(self, stream: _Stream, partition: int, offset: int, now_ms: float) -> None:
        """The consumer is at `offset`: an acknowledged message below it that was not received is lost."""
        heap = stream.acked_offsets
        while heap and heap[0][0] < offset:
            acked_offset, seq = heapq.heappop(heap)
            sent = stream.pending.get(seq)
            if sent is not None and sent.receive_ms is None and sent.offset == acked_offset:
                self._finish(stream, partition, sent, "lost", now_ms,
                             error=f"gap: consumer passed offset {acked_offset} without it")

    # ----- time -----

    def expire(self, now_ms: float) -> int:
        """Declares lost every acknowledged message not received within the SLA; forgets finished
        messages older than the duplicate memory. Returns how many were declared lost."""
        lost = 0
        with self._lock:
            for partition, stream in self._streams.items():
                late = [s for s in stream.pending.values()
                        if s.ack_ms is not None and s.receive_ms is None and now_ms - s.send_ms > self.rtt_sla_ms]
                for sent in late:
                    self._finish(stream, partition, sent, "lost", now_ms,
                                 error=f"not received within {self.rtt_sla_ms / 1000:g} s")
                lost += len(late)
                while stream.done:
                    seq, (_, finished, _) = next(iter(stream.done.items()))
                    if now_ms - finished <= self._memory_ms:
                        break
                    stream.done.popitem(last=False)
                if stream.acked_offsets and not stream.pending:
                    stream.acked_offsets.clear()
        return lost

    def unresolved(self) -> dict[str, int]:
        """Messages still in flight: sent but not acknowledged, or acknowledged and not yet received."""
        with self._lock:
            unacked = sum(1 for s in self._streams.values() for m in s.pending.values() if m.ack_ms is None)
            unreceived = sum(1 for s in self._streams.values() for m in s.pending.values()
                             if m.ack_ms is not None and m.receive_ms is None)
        return {"unacknowledged": unacked, "acknowledged_not_received": unreceived}

    # ----- observations -----

    def _finish(self, stream: _Stream, partition: int, sent: _Sent, outcome: str, now_ms: float,
                error: str | None = None) -> None:
        stream.pending.pop(sent.seq, None)
        stream.done[sent.seq] = (outcome, now_ms, sent)
        if outcome in ("delivered", "out_of_order", "lost"):
            self.ledger.count(now_ms, sent.lane, partition, outcome)
        if outcome != "delivered" and outcome != "produce_error" and self.events:
            self.events.outcome(partition, sent.leader, sent.lane, outcome)
        self._observe(partition, sent, outcome, error=error)

    def _observe(self, partition: int, sent: _Sent, outcome: str, error: str | None = None,
                 receive_ms: float | None = None) -> None:
        receive = receive_ms if receive_ms is not None else sent.receive_ms
        self.emit(Observation(
            run_id=self.id.run_id, kind="probe", source=self.id.producer_id, topic=self.id.topic,
            partition=partition, leader=sent.leader, lane=sent.lane,  # type: ignore[arg-type]
            producer_id=self.id.producer_id, message_id=f"{self.id.epoch}-{partition}-{sent.seq}", seq=sent.seq,
            send_ts=_us(sent.send_ms), ack_ts=None if sent.ack_ms is None else _us(sent.ack_ms),
            receive_ts=None if receive is None else _us(receive), outcome=outcome, error=error))


def _us(ms: float) -> float:
    """Milliseconds kept to the microsecond: enough for a loopback p50 under 1 ms, short in JSON."""
    return round(ms, 3)
