"""The probe's broker readings: every few seconds each broker's catalogue metrics (canary.broker_metrics), written
as BrokerReadings with the broker's lane at that moment beside the probe's observations, so the analysis compares
the brokers of the two lanes in the same time buckets as the messages."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from canary.broker_metrics import BrokerMetricsError, BrokerMetricsSource
from canary.observations import BrokerReading, Lane


class BrokerReadings:
    """Samples `source` every `interval` seconds until stopped; a reading that fails is counted and named (the
    last error), never raised into the probe: a broker that cannot be read is preflight's to refuse."""

    def __init__(self, source: BrokerMetricsSource, interval: float, run_id: str, name: str,
                 lane_of: Callable[[int], str], emit: Callable[[BrokerReading], None]):
        self.source, self.interval, self.run_id, self.name = source, interval, run_id, name
        self.lane_of, self.emit = lane_of, emit
        self.written = 0
        self.failed = 0
        self.last_error: str | None = None

    def sample_once(self) -> int:
        """One reading of every broker; how many readings were written."""
        at = float(int(time.time() * 1000))  # one time for the whole sampling: the judge compares brokers by it
        try:
            samples = self.source.sample()
        except BrokerMetricsError as exc:
            self.failed += 1
            self.last_error = str(exc)
            return 0
        for s in samples:
            lane: Lane = "canary" if self.lane_of(s.broker) == "canary" else "baseline"
            self.emit(BrokerReading(self.run_id, self.name, s.broker, lane, s.metric, s.value, at))
        self.written += len(samples)
        return len(samples)

    def loop(self, stop: threading.Event) -> None:
        self.sample_once()  # an exporter's rates need a first reading
        while not stop.wait(self.interval):
            self.sample_once()

    def stats(self) -> dict:
        return {"written": self.written, "failed": self.failed, "last_error": self.last_error}
