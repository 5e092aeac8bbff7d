"""What the migration canary keeps in its run.json beyond every kind's record: the preflight's evidence as its
snapshot (`MigrationSnapshot`) and the window's span and the disturbance it caused (`MigrationWindow`)."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import ConfigDict

from canary.rollout.core.record import RunKind, RunRecord, Snapshot, Window


class MigrationSnapshot(Snapshot):
    """What preflight found (canary.rollout.migration.preflight.preflight): the finalized and supported
    group.version, the brokers' rebalance protocols, the migration policy, the consumer heartbeat interval, the
    topic's partitions, the brokers, the group before the run."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    group_version: int
    group_version_supported_max: int | None = None
    rebalance_protocols: list[str] | None = None
    migration_policy: str | None = None
    migration_policy_is_default: bool = False
    consumer_heartbeat_interval_ms: str | None = None
    topic_partitions: int
    brokers: int
    group_before: dict[str, Any] = {}


class MigrationWindow(Window):
    """The compared window: its span (seconds since the epoch) and the disturbance it caused."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)
    DETAILS: ClassVar[frozenset[str]] = frozenset({"start_s", "end_s", "disturbance"})

    start_s: float | None = None
    end_s: float | None = None
    disturbance: dict[str, Any] | None = None


class MigrationRunRecord(RunRecord):
    """A migration canary's run.json: every kind's record with its preflight evidence and window."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, populate_by_name=True)

    kind: Literal[RunKind.MIGRATION] = RunKind.MIGRATION
    before: MigrationSnapshot | None = None
    window: MigrationWindow | None = None
