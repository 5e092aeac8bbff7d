"""Proof that a roll restarted a broker: its JVM's start time, from the broker's own metrics, read before the roll
and again after it. A canary's roll shows itself (the broker comes back with the canary rack); a control broker's
changes nothing, and a deployer that skips a roll with nothing to change (an idempotent script, an Ansible handler
that fires only on a changed file) leaves it running: the control is then compared warm against the cold canary,
and a harmless change is rolled back (docs/bench.md, "Compose stack")."""

from __future__ import annotations

from canary.broker_metrics import PROCESS_START, BrokerMetricsError, BrokerMetricsSource, PrometheusSource
from canary.errors import InfrastructureError
from canary.fields import format_utc
from canary.kafka.wait import WaitTimeout, wait_until
from canary.rollout.broker.metrics import broker_metrics_source
from canary.rollout.broker.rollout import Rollout
from canary.rollout.core.audit import AuditAction

# How long a restarted broker's metrics may take to answer at all: a fresh JVM's agent answers its first scrape slowly
# on a loaded machine (CI saw no answer within 10 s of the broker's registration).
ANSWERS_WITHIN_S = 60.0
# How long, once they answer, they may still give the start time from before the roll: a Prometheus scrapes every
# 15-60 s; a broker's own agent runs in the broker's JVM, so only a process that was never restarted can answer with
# the old one.
OLD_SHOWS_FOR_S = {"prometheus": 120.0, "agent": 10.0}


class NotRestarted(InfrastructureError):
    """The deployer's roll left the broker's process running: the change is not judged (the run ends UNFINISHED
    after rolling back what it changed)."""


class RestartCheck:
    """Made before a roll of `broker_id`, confirmed after it; does nothing when the broker's metrics are off or do
    not say when its process started."""

    def __init__(self, run: Rollout, broker_id: int):
        self.run = run
        self.broker_id = broker_id
        self.source = self._source()
        self.old_for_s = OLD_SHOWS_FOR_S["prometheus" if isinstance(self.source, PrometheusSource) else "agent"]
        self.before = self._started()

    def confirm(self) -> str | None:
        """Waits until the broker's process started after the roll began; returns when it did (UTC), or None when
        that cannot be read (audited and let pass: the window's broker metrics are checked on their own). Raises
        NotRestarted when its metrics keep giving the start time from before."""
        if self.before is None:
            return None
        # Asked where the metrics are again: the roll may have given the broker's agent another port (the old one
        # taken meanwhile, canary.cluster.processes), and the old address would never answer.
        self.source = self._source()
        before, seen = self.before, []

        def answered() -> str | None:
            now = self._started()
            if now is None:
                return f"broker {self.broker_id}'s metrics do not say when its process started{self._why()}"
            seen.append(now)
            return None

        def newer() -> str | None:
            missing = answered()
            if missing is None and seen[-1] <= before:
                missing = f"broker {self.broker_id}'s process started at {format_utc(seen[-1] * 1000)}"
            return missing
        try:
            wait_until(f"broker {self.broker_id}'s metrics", ANSWERS_WITHIN_S, answered, self.run.progress)
        except WaitTimeout as exc:
            self.run.audit.record(self.run.step, AuditAction.RESTART_NOT_CONFIRMED, broker=self.broker_id,
                                  reason=str(exc))
            return None
        if seen[-1] > before:
            return format_utc(seen[-1] * 1000)
        try:
            wait_until(f"broker {self.broker_id}'s restart", self.old_for_s, newer, self.run.progress)
        except WaitTimeout:
            self.run.audit.record(self.run.step, AuditAction.BROKER_NOT_RESTARTED, broker=self.broker_id,
                                  started=format_utc(before * 1000))
            raise NotRestarted(
                f"broker {self.broker_id} was not restarted: its process started at {format_utc(before * 1000)}, "
                f"before the roll, and its metrics still said so {self.old_for_s:.0f} s after it. A control broker "
                f"is rolled with nothing changed and must restart all the same, to be as fresh as the canary it is "
                f"compared with: make the deployer's roll restart a broker even when its version and config are the "
                f"ones it runs (docs/deployers.md), or run without control brokers (canary.control: none)") from None
        return format_utc(seen[-1] * 1000)

    def _source(self) -> BrokerMetricsSource | None:
        source = broker_metrics_source(self.run)
        return source.only([PROCESS_START], [self.broker_id]) if source is not None else None

    def _why(self) -> str:
        """Why the start time could not be read, when the source can say (an agent that does not answer, where)."""
        try:
            if self.source is not None:
                self.source.check()
        except BrokerMetricsError as exc:
            return f": {exc}"
        return ""

    def _started(self) -> float | None:
        if self.source is None:
            return None
        try:
            samples = self.source.sample()
        except BrokerMetricsError:
            return None
        return next((s.value for s in samples if s.broker == self.broker_id), None)
