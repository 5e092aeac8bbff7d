"""What a migration canary is asked to do (MigrationSpec, from CLI flags or a YAML/JSON file) and the errors it
raises."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from canary.clients.view import connection_settings
from canary.errors import CanaryError, one_line
from canary.kafka.settings import client_settings_from_env
from canary.lanes import canary_client_id
from canary.rollout.spec import RUN_ID, SpecIdentity

Protocol = Literal["classic", "consumer"]
Action = Literal["auto", "promote", "rollback"]


class MigrationError(CanaryError):
    """The migration canary cannot go on as asked."""


class MigrationRefused(MigrationError):
    """Preflight refused: nothing was started or changed; the message says what to do."""


@dataclass(frozen=True)
class MigrationSpec(SpecIdentity):
    """bootstrap_servers, topic, group: the service's cluster, topic and group id. baseline / canary: instance
    counts (baseline on classic, canary on consumer). rate: records/s the canary's producer writes. window_s: the
    compared window; disturb_at_s: when (into the window) one baseline instance restarts, restart_gap_s how long it
    stays away. classic_assignor: partition.assignment.strategy of classic instances (None: librdkafka's default,
    eager range,roundrobin). remote_assignor: group.remote.assignor of consumer instances (None: the broker's
    default). client: librdkafka connection/security settings. action: after the verdict, `auto` (promote on
    PROMOTE, otherwise roll back), `promote` or `rollback` (a person decided). judge_config: YAML merged over the
    migration's judge defaults. settle_timeout_s: how long the group may take to settle after each change.
    run_id: the run's id (default: one derived from the spec, so the same spec in the same out_dir finds its run)."""

    RUN_ID_PREFIX = "migration"

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
    run_id: str | None = None

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
        if self.run_id is not None and (not isinstance(self.run_id, str) or not RUN_ID.match(self.run_id)):
            raise MigrationError(f"run_id {self.run_id!r} must be 1-100 letters, digits, '.', '_' or '-', "
                                 f"starting with a letter or digit")
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
        """The spec as run.json and result.json keep it: JSON-able, every secret-named client setting masked."""
        return {**super().to_dict(), "out_dir": str(self.out_dir)}


def load_migration_spec(source: str | Path | Mapping, environ: Mapping[str, str] | None = None) -> MigrationSpec:
    """A spec from a YAML/JSON file or a mapping with MigrationSpec's fields; unknown fields are refused. With
    `environ`, its KAFKA_CANARY_CLIENT_<KEY> variables add or override the client settings."""
    if isinstance(source, Mapping):
        raw: object = dict(source)
    else:
        try:
            raw = yaml.safe_load(Path(source).read_text())
        except (OSError, yaml.YAMLError) as exc:
            raise MigrationError(f"cannot read the migration spec {source}: {one_line(exc)}") from exc
    if not isinstance(raw, dict):
        raise MigrationError("the migration spec must be a mapping of MigrationSpec's fields")
    known = {f.name for f in dataclasses.fields(MigrationSpec)}
    unknown = sorted(set(raw) - known)
    if unknown:
        raise MigrationError(f"unknown field(s) in the migration spec: {', '.join(unknown)}; known: "
                             f"{', '.join(sorted(known))}")
    client = {**(raw.get("client") or {}), **(client_settings_from_env(dict(environ)) if environ is not None else {})}
    try:
        spec = MigrationSpec(**{**raw, "out_dir": Path(raw.get("out_dir") or "."), "client": client})
    except TypeError as exc:  # a required field missing
        raise MigrationError(f"the migration spec is incomplete: {exc}") from exc
    return spec.validate()
