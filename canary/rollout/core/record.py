"""The record of one run, as run.json keeps it, for every rollout kind: `RunRecord` with its `StepRecord`s, its
`Window` (with the interim `Look`s) and its `Verdict`; `RunStatus`, which knows the run's outcome and so its exit
code (canary.outcome); and `RunSummary`, what a run says when a command or a task ends. The record is serialized
here and only here (`RunRecord.load`, `RunRecord.to_json`); where it is stored, and how two writers' records are
merged, is canary.rollout.core.run's.

Schema 3: the record says which kind made it (`kind`); the pre-rollout snapshot (`before`) and the window are the
kind's own models (`Snapshot`, `Window` subclassed in the kind's module: canary.rollout.broker.record, …), hung on
the kind's record (`RunRecord` subclassed with a Literal `kind`), so that `canary.rollout.records` reads any run.json
as a discriminated union. Every verdict has the same fields (a failed step's ROLLBACK too). A schema 1 or 2 run.json
(what kafka-canary wrote before) loads as it is: a field it lacks takes its default, and its kind is what its spec
says (`legacy_kind`, the one place that still reads a kind from a spec's keys).
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any, ClassVar, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_serializer

from canary.judge import ROLLBACK, Brief, VerdictWord
from canary.outcome import Outcome

SCHEMA = 3
READABLE_SCHEMAS = (1, 2, 3)  # a run.json of an older schema is read as this one; its next write is this one


class RunKind(StrEnum):
    """Which rollout kind made a run (canary.rollout.core.kind.RolloutKind.name)."""

    BROKER = "broker"
    CLIENT = "client"
    MIGRATION = "migration"


def legacy_kind(spec: Mapping[str, Any]) -> RunKind:
    """The kind of a run.json written before records said it (schema 1 and 2): each kind's stored spec has keys no
    other has."""
    if "service" in spec:
        return RunKind.CLIENT
    if "out_dir" in spec:
        return RunKind.MIGRATION
    return RunKind.BROKER


def readable(data: Mapping[str, Any]) -> Mapping[str, Any]:
    """run.json's content as this version reads it: ValueError for a schema not in READABLE_SCHEMAS; one written
    before records said their kind gets the one its spec says."""
    if data.get("schema") not in READABLE_SCHEMAS:
        raise ValueError(f"schema {data.get('schema')!r} is not one of {READABLE_SCHEMAS}")
    if data.get("kind") is None and isinstance(data.get("spec"), Mapping):
        return {**data, "kind": legacy_kind(data["spec"])}
    return data


class RunStatus(StrEnum):
    """Where a run is: new → preflight → (lane open →) canary deployed → judged <VERDICT> → promoted or rolled_back →
    verified promoted or verified rolled_back. Its value is what run.json keeps."""

    NEW = "new"
    PREFLIGHT = "preflight"
    LANE_OPEN = "lane open"
    CANARY_DEPLOYED = "canary deployed"
    JUDGED_PROMOTE = "judged PROMOTE"
    JUDGED_ROLLBACK = "judged ROLLBACK"
    JUDGED_INCONCLUSIVE = "judged INCONCLUSIVE"
    PROMOTED = "promoted"
    ROLLED_BACK = "rolled_back"
    VERIFIED_PROMOTED = "verified promoted"
    VERIFIED_ROLLED_BACK = "verified rolled_back"

    @classmethod
    def judged(cls, verdict: str) -> RunStatus:
        return cls(f"judged {verdict}")

    def as_verified(self) -> RunStatus:
        """The status once verify passed after this one (promoted or rolled_back)."""
        if self is RunStatus.PROMOTED:
            return RunStatus.VERIFIED_PROMOTED
        if self is RunStatus.ROLLED_BACK:
            return RunStatus.VERIFIED_ROLLED_BACK
        raise ValueError(f"a run at '{self}' has nothing to verify: promote or roll back first")

    @property
    def verified(self) -> bool:
        """Verify passed: the run is over."""
        return self in (RunStatus.VERIFIED_PROMOTED, RunStatus.VERIFIED_ROLLED_BACK)

    @property
    def finished(self) -> bool:
        """Promote or rollback has finished (verified or not): no further change is made."""
        return self.promoted or self in (RunStatus.ROLLED_BACK, RunStatus.VERIFIED_ROLLED_BACK)

    @property
    def rolled_back(self) -> bool:
        """The change was rolled back (verified or not)."""
        return self in (RunStatus.ROLLED_BACK, RunStatus.VERIFIED_ROLLED_BACK)

    @property
    def promoted(self) -> bool:
        """The change was promoted (verified or not); else, once finished, it was rolled back."""
        return self in (RunStatus.PROMOTED, RunStatus.VERIFIED_PROMOTED)

    def outcome(self) -> Outcome:
        """PROMOTE or ROLLBACK once verified; INCONCLUSIVE while a person must decide (judged INCONCLUSIVE and
        nothing done since); UNFINISHED for anything else: a run that stopped (or has not yet got) before verify,
        not because of a verdict. RunRecord.outcome() adds the one case the status alone cannot tell (a rollback
        because the deployer could not reach a node); it is what every consumer reads."""
        if self is RunStatus.VERIFIED_PROMOTED:
            return Outcome.PROMOTE
        if self is RunStatus.VERIFIED_ROLLED_BACK:
            return Outcome.ROLLBACK
        if self is RunStatus.JUDGED_INCONCLUSIVE:
            return Outcome.INCONCLUSIVE
        return Outcome.UNFINISHED

    @property
    def exit_code(self) -> int:
        return self.outcome().exit_code


class StepStatus(StrEnum):
    NEW = "new"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"


class _Record(BaseModel):
    """A part of the record: unknown fields refused; the fields named in DETAILS (what only some kinds have) are left
    out of run.json while they are None."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)
    DETAILS: ClassVar[frozenset[str]] = frozenset()

    @model_serializer(mode="wrap")
    def _without_absent_details(self, handler: Any) -> dict[str, Any]:
        return {key: value for key, value in handler(self).items() if value is not None or key not in self.DETAILS}


class StepRecord(_Record):
    """One step's record: its status, attempts so far, when the last attempt started and finished, and its result
    (the step's small JSON-able dict) or error."""

    status: StepStatus = StepStatus.NEW
    attempts: int = 0
    started_ms: int | None = None
    finished_ms: int | None = None
    result: dict[str, Any] | None = None
    error: str | None = None
    DETAILS: ClassVar[frozenset[str]] = frozenset({"infrastructure", "task"})
    # True: the error was the road to the nodes (canary.errors.InfrastructureError); left out of run.json otherwise
    infrastructure: bool | None = None
    task: str | None = None  # the Airflow task that ran the step (the report links to its log); None from the CLI

    @property
    def took_s(self) -> float:
        """Seconds the last attempt took (so far)."""
        started = self.started_ms or 0
        return ((self.finished_ms or started) - started) / 1000


class Look(Brief, _Record):
    """An interim look at the window (or what else stopped it: a canary instance that exited). observations: those
    judged (broker) or read (client); usable: of those read, the ones judged (client); at_s: seconds into the window;
    evidence: each tested metric's [e-value, boundary] at the look (canary.judge.e_values), for the report's path."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    DETAILS: ClassVar[frozenset[str]] = frozenset({"observations", "usable", "at_s", "evidence"})

    observations: int | None = None
    usable: int | None = None
    at_s: float | None = None
    evidence: dict[str, list[float]] | None = None


class Window(_Record):
    """The last window: its attempt, start and end, the look that stopped it early (fail fast) or None, and its
    interim looks. A kind adds its own details in a subclass of its own (canary.rollout.broker.record.BrokerWindow:
    the probe, the brokers' readings, the load, the traffic; the migration canary's span and disturbance); read by a
    reader that does not know the kind, those details are kept as they are."""

    model_config = ConfigDict(extra="allow", validate_assignment=True)

    attempt: int | None = None
    start_ms: int
    end_ms: int
    stopped_early: Look | None = None
    interim: list[Look] = []


class Snapshot(_Record):
    """The pre-rollout snapshot (run.json's `before`): what rollback and verify compare with. Each kind has its own
    (canary.rollout.broker.record.BrokerSnapshot, …); read by a reader that does not know the kind, its fields are
    kept as they are."""

    model_config = ConfigDict(extra="allow", validate_assignment=True)

    taken_ms: int | None = None


class Verdict(Brief, _Record):
    """The run's verdict: its word, reason and failed metrics (the brief), the engine that reached it (`spark`,
    `inline`, `interim` for fail fast, None for a failed step), the window judged, whether it stopped early and after
    how many interim looks, the analysis directory. A broker rollout adds its probe and the traffic it judged, a
    client rollout the observations read, the migration canary its two parts' verdicts."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    DETAILS: ClassVar[frozenset[str]] = frozenset({"probe_run_id", "probe", "traffic", "observations", "disruption",
                                                   "judge", "infrastructure"})

    engine: Literal["spark", "inline", "interim"] | None = None
    window_ms: tuple[int, int] | None = None
    stopped_early: bool = False
    interim_looks: int = 0
    analysis: str | None = None
    probe_run_id: str | None = None
    probe: dict[str, dict[str, Any]] | None = None  # per lane: sent, acked, lost, produce_errors
    traffic: dict[str, Any] | None = None
    observations: int | None = None
    disruption: VerdictWord | None = None
    judge: VerdictWord | None = None
    infrastructure: bool | None = None  # a failed step's, True: the road to the nodes broke, the change not judged

    @classmethod
    def failure(cls, step: str, error: object, infrastructure: bool = False) -> Verdict:
        """The verdict of a step that failed after the first change: ROLLBACK, the failure its reason. An
        `infrastructure` failure is rolled back as well, but the run then ends UNFINISHED, not ROLLBACK."""
        why = " (the deployer could not reach or drive a node: the change was not judged)" if infrastructure else ""
        return cls(verdict=ROLLBACK, reason=f"{step} failed{why}: {error}", infrastructure=infrastructure or None)

    @classmethod
    def of_window(cls, brief: Brief, window: Window | None, **details: Any) -> Verdict:
        """`brief` (with its engine and analysis, when it has them) as the verdict of `window`, with `details`."""
        fields = brief.model_dump(include={"verdict", "reason", "failed", "engine", "analysis"})
        if window is not None:
            fields |= {"window_ms": (window.start_ms, window.end_ms), "stopped_early": window.stopped_early is not None,
                       "interim_looks": len(window.interim)}
        return cls(**fields | details)

    def to_dict(self) -> dict:
        return self.model_dump(mode="json")


class RunSummary(BaseModel):
    """What a run says when a command or task ends: its outcome (by its status, RunStatus.outcome) and exit code,
    status, the verdict and reason, a note for a person, where its files and report are."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    run_id: str
    outcome: Outcome
    status: RunStatus
    verdict: VerdictWord | None = None
    reason: str | None = None
    note: str = ""
    run_dir: str
    report: str

    @property
    def exit_code(self) -> int:
        return self.outcome.exit_code

    def line(self) -> str:
        """One line for logs: `ROLLBACK (verified rolled_back): fail fast after 46.1s: …`."""
        reason = " ".join((self.reason or "no verdict").split())
        return f"{self.outcome} ({self.status}): {reason}" + (f"; {self.note}" if self.note else "")

    def to_dict(self) -> dict:
        """JSON-able (XCom, the command line's --json), with the exit code."""
        return self.model_dump(mode="json") | {"exit_code": self.exit_code}


Trigger = Literal["cli", "airflow", "release", "schedule", "asset", "backfill"]
# How a page says each trigger.
TRIGGER_WORDS: dict[str, str] = {
    "cli": "the command line", "airflow": "Airflow (UI or API)", "release": "the release pipeline",
    "schedule": "Airflow's schedule", "asset": "an asset event", "backfill": "a backfill"}


class Origin(_Record):
    """What started the run: `trigger`, who (`by`, when the orchestrator names a user) and, for a
    DAG run, the DAG and Airflow's run id (the report links to the run's and each step's task page)."""

    trigger: Trigger
    by: str | None = None
    dag_id: str | None = None
    airflow_run_id: str | None = None

    def __str__(self) -> str:
        return TRIGGER_WORDS[self.trigger] + (f", by {self.by}" if self.by else "")


class RunRecord(_Record):
    """One run: which kind made it, its id, when it was created, its spec (secret settings as ***), status, the
    pre-rollout snapshot (`before`) and the canary brokers preflight chose, the steps' records, the last window and
    the verdict. A kind's record (canary.rollout.broker.record.BrokerRunRecord, …) types its snapshot and window and
    adds what only it keeps; read by a reader that does not know the kind (canary.rollout.records reads every kind),
    those fields are kept as they are."""

    model_config = ConfigDict(extra="allow", validate_assignment=True, populate_by_name=True)

    schema_version: int = Field(default=SCHEMA, alias="schema")
    kind: RunKind | None = None                # None: a record made without a kind (never one a rollout wrote)
    run_id: str
    created_ms: int
    spec: dict[str, Any]
    status: RunStatus = RunStatus.NEW
    before: Snapshot | None = None
    canary_brokers: list[int] | None = None
    steps: dict[str, StepRecord] = {}
    verdict: Verdict | None = None
    window: Window | None = None
    origin: Origin | None = None               # what started the run (None: a run older than the field)

    @classmethod
    def load(cls, data: Mapping[str, Any]) -> Self:
        """The record run.json holds (of a schema in READABLE_SCHEMAS; one of before schema 3 is given the kind its
        spec says). ValueError (pydantic's ValidationError, every problem named) for anything else."""
        return cls.model_validate(readable(data))

    def to_json(self) -> dict[str, Any]:
        """run.json's content: every field, None too (a field cleared is a change another writer's merge must see),
        in this schema whatever schema it was read in."""
        # default=str as json.dumps: a step's result or the snapshot may hold a value JSON has no type for
        return self.model_dump(mode="json", by_alias=True, fallback=str) | {"schema": SCHEMA}

    def step(self, name: str) -> StepRecord | None:
        return self.steps.get(name)

    def step_done(self, name: str) -> bool:
        step = self.steps.get(name)
        return step is not None and step.status is StepStatus.DONE

    def outcome(self) -> Outcome:
        """The status's outcome, except that a run rolled back because its deployer could not reach a node ends
        UNFINISHED: the change was not judged bad."""
        if self.status is RunStatus.VERIFIED_ROLLED_BACK and self.verdict is not None and self.verdict.infrastructure:
            return Outcome.UNFINISHED
        return self.status.outcome()

    def summary(self, run_dir: str, report: str, note: str = "") -> RunSummary:
        verdict = self.verdict
        return RunSummary(run_id=self.run_id, outcome=self.outcome(), status=self.status,
                          verdict=verdict.verdict if verdict else None, reason=verdict.reason if verdict else None,
                          note=note, run_dir=run_dir, report=report)
