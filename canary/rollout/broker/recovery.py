"""Whether restarted brokers still move towards serving, so their warm-up waits while they do: a broker that
recovers its logs for many minutes after an unclean stop is slow, not stuck (strimzi-kafka-operator #12649), and a
fixed timeout would fail the roll of a healthy broker on a large fleet.

Progress is what is missing changing to something not seen before (registered; fewer partitions out of the ISR),
or, while a broker is not registered yet, the logs and segments it still has to recover going down (KIP-831's
gauges, from the brokers' own metrics, read at most every CHECK_EVERY seconds and shown in the wait's progress
lines). Flapping between states seen before, or a cluster that does not answer, is not progress.
"""

from __future__ import annotations

import time
from collections.abc import Collection

from canary.broker_metrics import BrokerMetricsError, BrokerMetricsSource
from canary.broker_metrics.catalogue import RECOVERY

CHECK_EVERY = 5.0
NOT_ANSWERING = "cluster not answering"


class Recovery:
    """What `brokers` still have to recover, and whether their warm-up moved (kafka.wait.wait_until's `moving`).
    source: the rollout's broker metrics (None: progress is read from the cluster's answers alone)."""

    def __init__(self, source: BrokerMetricsSource | None, brokers: Collection[int]):
        self.source = source.only(RECOVERY) if source is not None else None
        self.brokers = set(brokers)
        self.seen: set[str] = set()
        self.left: dict[str, float] = {}    # logs_to_recover, segments_to_recover: the batch's sums at the last read
        self._read_at = float("-inf")

    def describe(self, missing: str | None) -> str | None:
        """`missing`, with what is left to recover while a broker is not registered yet."""
        if missing is None or "not registered" not in missing:
            return missing
        self._read()
        if not self.left:
            return missing
        return (f"{missing} (recovering its logs: {self.left.get('logs_to_recover', 0):.0f} log(s), "
                f"{self.left.get('segments_to_recover', 0):.0f} segment(s) left)")

    def moved(self, missing: str) -> bool:
        """Whether `missing` (as `describe` put it) is progress: a state not seen before."""
        if missing.startswith(NOT_ANSWERING) or missing in self.seen:
            return False
        self.seen.add(missing)
        return True

    def _read(self) -> None:
        if self.source is None or time.monotonic() - self._read_at < CHECK_EVERY:
            return
        self._read_at = time.monotonic()
        try:
            samples = self.source.sample()
        except BrokerMetricsError:
            return
        sums: dict[str, float] = {}
        for s in samples:
            if s.broker in self.brokers:
                sums[s.metric] = sums.get(s.metric, 0.0) + s.value
        self.left = sums
