"""What a migration canary is asked to do (MigrationSpec) and the errors it raises."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from canary.clients.view import connection_settings
from canary.errors import CanaryError
from canary.kafka.secrets import redacted
from canary.lanes import canary_client_id

Protocol = Literal["classic", "consumer"]
Action = Literal["auto", "promote", "rollback"]


class MigrationError(CanaryError):
    """The migration canary cannot go on as asked."""


class MigrationRefused(MigrationError):
    """Preflight refused: nothing was started or changed; the message says what to do."""


@dataclass(frozen=True)
class MigrationSpec:
    """bootstrap_servers, topic, group: the service's cluster, topic and group id. baseline / canary: instance
    counts (baseline on classic, canary on consumer). rate: records/s the canary's producer writes. window_s: the
    compared window; disturb_at_s: when (into the window) one baseline instance restarts, restart_gap_s how long it
    stays away. classic_assignor: partition.assignment.strategy of classic instances (None: librdkafka's default,
    eager range,roundrobin). remote_assignor: group.remote.assignor of consumer instances (None: the broker's
    default). client: librdkafka connection/security settings. action: after the verdict, `auto` (promote on
    PROMOTE, otherwise roll back), `promote` or `rollback` (a person decided). judge_config: YAML merged over the
    migration's judge defaults. settle_timeout_s: how long the group may take to settle after each change."""

    bootstrap_servers: str
    topic: str
    group: str
    out_dir: Path
    baseline: int = 3
    canary: int = 1
    rate: float = 40.0
    window_s: float = 60.0
    disturb_at_s: float = 20.0
    restart_gap_s: float = 2.0
    classic_assignor: str | None = None
    remote_assignor: str | None = None
    client: dict[str, str] = field(default_factory=dict)
    action: Action = "auto"
    judge_config: str | None = None
    settle_timeout_s: float = 120.0

    def validate(self) -> MigrationSpec:
        if not self.bootstrap_servers or not self.topic or not self.group:
            raise MigrationError("bootstrap servers, topic and group are required")
        if self.baseline < 1 or self.canary < 1:
            raise MigrationError(f"need at least one baseline and one canary instance (N >= 2), got baseline "
                                 f"{self.baseline}, canary {self.canary}")
        if self.rate <= 0:
            raise MigrationError(f"rate must be > 0 records/s, got {self.rate}")
        if not 0 < self.disturb_at_s < self.window_s:
            raise MigrationError(f"disturb_at_s must be inside the window (0, {self.window_s}), got "
                                 f"{self.disturb_at_s}")
        if self.restart_gap_s < 0 or self.settle_timeout_s <= 0:
            raise MigrationError("restart_gap_s must be >= 0 and settle_timeout_s > 0")
        if self.action not in ("auto", "promote", "rollback"):
            raise MigrationError(f"action must be auto, promote or rollback, got {self.action!r}")
        return self

    @property
    def names(self) -> list[str]:
        """Instance client ids: baseline `<group>-<i>`, canary `<group>-<i>-canary` (the canary marker)."""
        base = [f"{self.group}-{i}" for i in range(self.baseline)]
        return base + [canary_client_id(f"{self.group}-{self.baseline + i}") for i in range(self.canary)]

    def connection(self) -> dict[str, Any]:
        """librdkafka settings every client of the run starts from."""
        return {**connection_settings(self.client), "bootstrap.servers": self.bootstrap_servers}

    def to_dict(self) -> dict[str, Any]:
        """The spec as written to result.json: JSON-able, every secret-named client setting masked."""
        written = asdict(self)
        written["out_dir"] = str(self.out_dir)
        written["client"] = redacted(self.client)
        return written
