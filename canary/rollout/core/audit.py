"""The audit log of one rollout: every action, when, and the state before and after, one JSON line each.
Kept in the run storage beside the report; secrets never reach it (client settings are redacted, and the known
secret values are cut out of any text, such as an error message that quoted one). Appends from tasks on several
machines at once never lose a line (canary.storage).

Every action is an `AuditAction` (its value is what audit.jsonl keeps), so a writer and a reader cannot drift apart
on a spelling. The log is what happened, for people and the report; what a step needs to resume is in the run's
record (run.json), never recovered from here. The actions a report reads back have typed details
(`WaveLookEntry`, `PromotionPlanEntry`, …: `AuditEntry.details_as`)."""

from __future__ import annotations

import json
import time
from enum import StrEnum
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict

from canary.kafka.secrets import scrub, scrub_text
from canary.storage import Store, open_store

AUDIT_KEY = "audit.jsonl"


class AuditAction(StrEnum):
    """Every action a rollout writes to its audit log, by the step or part that takes it."""

    # the step framework (canary.rollout.core.step, engine)
    STEP_STARTED = "step started"
    STEP_FINISHED = "step finished"
    STEP_FAILED = "step failed"
    STEP_REFUSED = "step refused"
    STARTED_OVER = "started over"
    VERDICT = "verdict"
    # the cluster lock
    LOCK_TAKEN = "lock taken"
    LOCK_ALREADY_HELD = "lock already held by this rollout"
    LOCK_ALREADY_HELD_BY_RUN = "lock already held by this run"
    LOCK_RELEASED = "lock released"
    LOCK_NOT_HELD = "lock was not held"
    LOCK_RELEASED_PREFLIGHT_FAILED = "lock released: preflight failed before any change"
    LOCK_RELEASED_AT_EXIT = "lock released at the end of the process"
    # preflight
    SNAPSHOT = "snapshot"
    TRAFFIC_BEFORE = "traffic before the change"
    LOAD_SIZED = "load sized"
    # rolling brokers and controllers under the guards
    RESTART_BROKER = "restart broker"
    BROKER_RESTARTED = "broker restarted"
    BROKER_NOT_RESTARTED = "broker not restarted"
    RESTART_NOT_CONFIRMED = "restart not confirmed"
    RESTART_CONTROLLER = "restart controller"
    BATCH_IN_ISR = "batch back in every ISR"
    GUARD_REFUSED = "guard refused"
    GUARD_ALLOWED = "guard allowed after waiting"
    QUORUM_GUARD_REFUSED = "quorum guard refused"
    QUORUM_GUARD_ALLOWED = "quorum guard allowed after waiting"
    DEPLOYER_COMMAND = "deployer command"
    DEPLOYER_COMMAND_FAILED = "deployer command failed"
    CONTAINER_RECOVERED = "container recovered"
    # leadership
    PREFERRED_ELECTION = "preferred leader election"
    DRAIN = "drain"
    UNDRAIN = "undrain"
    DRAINED = "drained"
    DRAIN_INCOMPLETE = "drain incomplete"
    KEEP_LEADERS_OFF = "keep leaders off the canary"
    OPEN_LANE = "open lane"
    CLOSE_LANE = "close lane"
    LANE_OPEN = "lane open"
    LANE_CLOSED = "lane closed"
    # probes, the window and its looks
    PROBE = "probe"
    PROBE_STARTED = "probe started"
    PROBE_DURING_ROLLS = "probe during the rolls"
    LOAD_STARTED = "load started"
    TRAFFIC_SHARE = "traffic share"
    WINDOW_STARTED = "window started"
    WINDOW = "window"
    CLUSTER_DISTURBED = "cluster disturbed"
    INTERIM_LOOK = "interim look"
    OBSERVATIONS_READ = "observations read"
    # promotion
    PROMOTION_PLAN = "promotion plan"
    WAVE_LOOK_STARTED = "wave look started"
    WAVE_LOOK = "wave look"
    PAUSED = "paused"
    RESUMED = "resumed"
    FINALIZE_PENDING = "finalize pending"
    FINALIZE = "finalize"
    # verify
    DIFFERENCES = "differences"
    # service instances (client rollout, migration canary)
    START_INSTANCE = "start instance"
    STOP_INSTANCE = "stop instance"
    JOINED = "joined"
    PROMOTE = "promote"
    ROLLBACK = "rollback"

    @property
    def is_probe(self) -> bool:
        """A probe's run: its entry carries the probe's counts (the report's accounting)."""
        return self in (AuditAction.PROBE, AuditAction.PROBE_DURING_ROLLS)


class _Details(BaseModel):
    """The details of an action something reads back: the fields read are typed, others are kept."""

    model_config = ConfigDict(extra="allow", frozen=True)


class PlannedWave(_Details):
    wave: int
    batches: list[list[int]] = []


class PromotionPlanEntry(_Details):
    approved: bool = False
    waves: list[PlannedWave] = []
    notes: list[str] = []


class WaveLookEntry(_Details):
    wave: int
    verdict: str | None = None
    reason: str | None = None
    promoted: list[int] = []
    control: int | None = None


class DrainedEntry(_Details):
    brokers: list[int] = []
    drained: int = 0


class InstanceEntry(_Details):
    instance: str
    version: str | None = None


class RestartEntry(_Details):
    broker: int
    phase: str | None = None
    before: dict[str, Any] | None = None
    after: dict[str, Any] | None = None


class LookEntry(_Details):
    verdict: str | None = None
    reason: str | None = None
    at_s: float | None = None


D = TypeVar("D", bound=_Details)


class AuditEntry(BaseModel):
    """One line of the log: when, which run and step, the action and its details. An action this version does not
    know (a newer writer's) is kept as its text."""

    model_config = ConfigDict(frozen=True)

    ts_ms: int
    run_id: str
    step: str
    action: AuditAction | str
    details: dict[str, Any] = {}

    @classmethod
    def of_line(cls, data: dict[str, Any]) -> AuditEntry:
        head = {k: data.get(k) for k in ("ts_ms", "run_id", "step", "action")}
        action = str(head["action"])
        known = action in AuditAction._value2member_map_
        return cls(ts_ms=int(head["ts_ms"] or 0), run_id=str(head["run_id"] or ""), step=str(head["step"] or ""),
                   action=AuditAction(action) if known else action,
                   details={k: v for k, v in data.items() if k not in head})

    def get(self, key: str, default: Any = None) -> Any:
        return self.details.get(key, default)

    def __getitem__(self, key: str) -> Any:
        """A field of the line as audit.jsonl keeps it (`entry["broker"]`)."""
        return self.to_json()[key]

    def details_as(self, model: type[D]) -> D:
        return model.model_validate(self.details)

    def to_json(self) -> dict[str, Any]:
        """The line as audit.jsonl keeps it."""
        return {"ts_ms": self.ts_ms, "run_id": self.run_id, "step": self.step, "action": str(self.action),
                **self.details}


class AuditLog:
    def __init__(self, store: Store | Path, run_id: str, secrets: list[str] | tuple[str, ...] = ()):
        """`store`: the run's storage (or a run directory on this disk)."""
        self.store = store if isinstance(store, Store) else open_store(store)
        self.run_id = run_id
        self.secrets = tuple(secrets)

    def record(self, step: str, action: AuditAction, **details: Any) -> dict:
        """Appends one entry (durably: a crash right after an action still leaves its trace)."""
        entry = {"ts_ms": int(time.time() * 1000), "run_id": self.run_id, "step": step, "action": str(action),
                 **scrub(details)}
        self.store.append(AUDIT_KEY, scrub_text(json.dumps(entry, sort_keys=False, default=str), self.secrets).encode())
        return entry

    def entries(self) -> list[AuditEntry]:
        return [AuditEntry.of_line(json.loads(line)) for line in self.store.lines(AUDIT_KEY)]

    def of(self, action: AuditAction) -> list[AuditEntry]:
        return [e for e in self.entries() if e.action is action]
