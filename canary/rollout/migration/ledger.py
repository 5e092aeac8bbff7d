"""What the run keeps account of while its threads work: the records the producer had acknowledged and the records
the instances consumed (DeliveryLedger, for verify's "every record consumed at least once"), and every instance's
rebalance callbacks on one clock (RebalanceRecorder, for the disruption accounting in canary.clients.rebalance)."""

from __future__ import annotations

import threading
import time
from collections import Counter

from canary.clients.rebalance import EventKind, RebalanceEvent
from canary.observations import Lane


class DeliveryLedger:
    """Records acknowledged by the producer and records consumed, as (partition, offset); thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.produced: set[tuple[int, int]] = set()
        self.consumed: Counter[tuple[int, int]] = Counter()
        self.produce_errors = 0

    def ack(self, partition: int, offset: int) -> None:
        with self._lock:
            self.produced.add((partition, offset))

    def produce_failed(self) -> None:
        with self._lock:
            self.produce_errors += 1

    def consume(self, partition: int, offset: int) -> None:
        with self._lock:
            self.consumed[(partition, offset)] += 1

    def unconsumed(self) -> int:
        with self._lock:
            return len(self.produced - set(self.consumed))

    def summary(self) -> dict:
        with self._lock:
            return {"produced": len(self.produced), "consumed": len(set(self.consumed) & self.produced),
                    "unconsumed": len(self.produced - set(self.consumed)),
                    "consumed_twice": sum(1 for record, times in self.consumed.items()
                                          if times > 1 and record in self.produced),
                    "produce_errors": self.produce_errors}


class RebalanceRecorder:
    """Rebalance events of every instance on one monotonic clock (seconds since the run started)."""

    def __init__(self) -> None:
        self.t0 = time.monotonic()
        self._lock = threading.Lock()
        self.events: list[RebalanceEvent] = []

    def now(self) -> float:
        return time.monotonic() - self.t0

    def record(self, instance: str, lane: Lane, kind: EventKind, partitions: list[int] | tuple[int, ...] = ()) -> None:
        with self._lock:
            self.events.append(RebalanceEvent(self.now(), instance, lane, kind, tuple(sorted(partitions))))

    def last_at(self) -> float:
        with self._lock:
            return self.events[-1].at if self.events else 0.0
