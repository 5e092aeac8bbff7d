"""What a migration canary is asked to do (MigrationSpec, from CLI flags, a YAML/JSON file or Python) and the errors
it raises. MigrationSpec is the model of the spec file: every field checked when it is built, every problem reported
at once (MigrationSpecError)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, model_validator

from canary.clients.view import connection_settings
from canary.errors import CanaryError
from canary.fields import BuiltSpec, ClientSettings, Duration, Location, Name, RunId, TopicName, required
from canary.lanes import canary_client_id
from canary.rollout.core.spec import DAY, SpecError, SpecIdentity, SpecSection, validated, with_environment

Protocol = Literal["classic", "consumer"]
Action = Literal["auto", "promote", "rollback"]


class MigrationError(CanaryError):
    """The migration canary cannot go on as asked."""


class MigrationRefused(MigrationError):
    """Preflight refused: nothing was started or changed; the message says what to do."""


class MigrationSpecError(SpecError, MigrationError):
    """A migration spec that cannot be used; `problems` lists every field to fix."""

    WHAT = "the migration spec"


class MigrationSpec(SpecSection, BuiltSpec, SpecIdentity):
    """bootstrap_servers, topic, group: the service's cluster, topic and group id. baseline / canary: instance
    counts (baseline on classic, canary on consumer). rate: records/s the canary's producer writes. window_s: the
    compared window; disturb_at_s: when (into the window) one baseline instance restarts, restart_gap_s how long it
    stays away. classic_assignor: partition.assignment.strategy of classic instances (None: librdkafka's default,
    eager range,roundrobin). remote_assignor: group.remote.assignor of consumer instances (None: the broker's
    default). client: librdkafka connection/security settings. action: after the verdict, `auto` (promote on
    PROMOTE, otherwise roll back), `promote` or `rollback` (a person decided). judge_config: YAML merged over the
    migration's judge defaults. settle_timeout_s: how long the group may take to settle after each change.
    run_id: the run's id (default: one derived from the spec, so the same spec in the same out_dir finds its run).
    Durations are seconds, or texts such as 30s or 2m. Building one with a bad field raises MigrationSpecError."""

    RUN_ID_PREFIX: ClassVar[str] = "migration"
    error: ClassVar = MigrationSpecError

    bootstrap_servers: Annotated[str, required("the service's cluster, host:port[,host:port…]")]
    topic: TopicName
    group: Name
    # a directory, or the run storage's URL (s3://bucket/prefix/run): where run.json, the audit log and the files go
    out_dir: Location = "."
    baseline: int = Field(3, strict=True, ge=1)
    canary: int = Field(1, strict=True, ge=1)
    rate: float = Field(40.0, strict=True, gt=0, le=10_000)
    window_s: Annotated[float, Duration(1, DAY)] = 60.0
    disturb_at_s: Annotated[float, Duration(0, DAY)] = 20.0
    restart_gap_s: Annotated[float, Duration(0, 3600)] = 2.0
    classic_assignor: str | None = None
    remote_assignor: str | None = None
    client: ClientSettings = Field(default_factory=dict)
    action: Action = "auto"
    judge_config: str | None = None
    settle_timeout_s: Annotated[float, Duration(1, DAY)] = 120.0
    run_id: RunId | None = None

    @model_validator(mode="after")
    def _disturbed_inside_the_window(self) -> MigrationSpec:
        if not 0 < self.disturb_at_s < self.window_s:
            raise ValueError(f"disturb_at_s {self.disturb_at_s:g}s must be inside the window: more than 0s and "
                             f"less than window_s {self.window_s:g}s")
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
        return {**super().to_dict(), "out_dir": self.out_dir}


def load_migration_spec(source: str | Path | Mapping, environ: Mapping[str, str] | None = None) -> MigrationSpec:
    """A spec from a YAML/JSON file or a mapping with MigrationSpec's fields; raises MigrationSpecError naming every
    bad field. With `environ`, its KAFKA_CANARY_CLIENT_<KEY> variables add or override the client settings."""
    spec = validated(MigrationSpec, source, MigrationSpecError)
    return spec.model_copy(update={"client": with_environment(spec.client, environ)})
