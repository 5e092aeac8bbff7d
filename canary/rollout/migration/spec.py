"""What a migration canary is asked to do (MigrationSpec, from CLI flags, a YAML/JSON file or Python) and the errors
it raises. MigrationSpec is the model of the spec file: every field checked when it is built, every problem reported
at once (MigrationSpecError)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from canary.clients.deployer import check_command
from canary.clients.view import connection_settings
from canary.errors import CanaryError
from canary.fields import BuiltSpec, ClientSettings, Duration, Location, Matching, Name, RunId, TopicName, required
from canary.kafka.secrets import is_secret, redacted
from canary.lanes import canary_client_id
from canary.rollout.core.spec import DAY, SpecError, SpecIdentity, SpecSection, validated, with_environment

Protocol = Literal["classic", "consumer"]
# Fields added after run.json's schema 1 (stored only when not at their default).
_ADDED = ("command", "env", "cwd", "version", "service_dir", "activity_check_s")
Action = Literal["auto", "promote", "rollback"]


class MigrationError(CanaryError):
    """The migration canary cannot go on as asked."""


class MigrationRefused(MigrationError):
    """Preflight refused: nothing was started or changed; the message says what to do."""


class MigrationSpecError(SpecError, MigrationError):
    """A migration spec that cannot be used; `problems` lists every field to fix."""

    WHAT = "the migration spec"


class MigrationSpec(SpecSection, BuiltSpec, SpecIdentity):
    """bootstrap_servers, topic, group: the service's cluster, topic and group id. command: the team's consumer as an
    argument list, {placeholders} from canary.clients.deployer.CONTRACT (empty: the sample subscribed consumer,
    canary.examples.services.group_consumer); env, cwd: its environment additions and working directory; version:
    the version every instance runs ({version}); service_dir: where its instances' state, logs and callbacks files
    are kept (default: a directory of the run's under the system's temporary directory). baseline / canary:
    instance counts (baseline on classic, canary on consumer). rate: records/s of synthetic traffic the canary
    writes into the topic (0, the default: none; the service's own traffic is judged). activity_check_s: how long
    preflight watches the group's committed offsets for consumers that are no members (assign()). window_s: the
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
    # the team's consumer: an argument list, {placeholders} from canary.clients.deployer.CONTRACT
    command: list[Annotated[str, Field(strict=True, min_length=1)]] = Field(default_factory=list)
    env: dict[Annotated[str, Matching(r"^[A-Za-z_][A-Za-z0-9_]*$", "an environment variable name such as "
                                      "JAVA_OPTS")], Annotated[str, Field(strict=True)]] = Field(default_factory=dict)
    cwd: str = ""
    version: Name = "current"
    service_dir: str = ""
    baseline: int = Field(3, strict=True, ge=1)
    canary: int = Field(1, strict=True, ge=1)
    rate: float = Field(0.0, strict=True, ge=0, le=10_000)
    activity_check_s: Annotated[float, Duration(0, 600)] = 6.0
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

    @field_validator("command")
    @classmethod
    def _known_placeholders(cls, command: list[str]) -> list[str]:
        if command:
            check_command("consumer", command)
        return command

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
        """The spec as run.json and result.json keep it: JSON-able, every secret-named client setting and
        environment value masked."""
        stored = {**super().to_dict(), "out_dir": self.out_dir, "env": redacted(self.env)}
        # fields added since schema 1 only when set, so a run.json written before them keeps its form and run id
        return {k: v for k, v in stored.items() if k not in _ADDED or v != type(self).model_fields[k].get_default(
            call_default_factory=True)}

    @property
    def secret_values(self) -> list[str]:
        """The secret client settings' and environment values: what no file of the run may contain."""
        return super().secret_values + [v for k, v in self.env.items() if is_secret(k) and v]


def load_migration_spec(source: str | Path | Mapping, environ: Mapping[str, str] | None = None) -> MigrationSpec:
    """A spec from a YAML/JSON file or a mapping with MigrationSpec's fields; raises MigrationSpecError naming every
    bad field. With `environ`, its KAFKA_CANARY_CLIENT_<KEY> variables add or override the client settings."""
    spec = validated(MigrationSpec, source, MigrationSpecError)
    return spec.model_copy(update={"client": with_environment(spec.client, environ)})
