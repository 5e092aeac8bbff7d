"""The storage of one rollout: `run.json` (the run's record, canary.rollout.core.record: spec, the pre-rollout
snapshot, canary brokers, step records, window, verdict),
the audit log, the probe observations, the analysis output and the report, in the run storage (canary.storage: a
directory on this disk, or an object store that every Airflow worker and the API server reach).

`run.json` is written after every change, conditionally: should another task (a retried try on another worker)
have written it since it was read, the two are merged — each keeps the steps and fields it changed — and written
again, so no step's result is ever overwritten by a writer that never saw it.
"""

from __future__ import annotations

import copy
import json
import logging
import os
import time
from pathlib import Path
from typing import Generic, TypeVar

from pydantic import ValidationError

from canary.errors import CanaryError
from canary.kafka.secrets import scrub_text
from canary.rollout.core.index import IndexEntry, RunsIndex
from canary.rollout.core.record import (
    READABLE_SCHEMAS,
    SCHEMA,
    Origin,
    RunRecord,
    RunStatus,
    Snapshot,
    StepRecord,
    StepStatus,
    Verdict,
    Window,
)
from canary.storage import Conflict, Store, open_store

log = logging.getLogger("canary.rollout")

RUN_FILE = "run.json"
MERGE_ATTEMPTS = 20


class RunStateError(CanaryError):
    """The run storage does not fit the rollout asked for."""


RUNS_ENV = "KAFKA_CANARY_RUNS"
# One place for every run, wherever a command starts (not the working directory): the CLI, the DAGs' tasks and the
# report pages all find the same runs.
DEFAULT_RUNS = "~/.local/state/kafka-canary/rollouts"


def runs_url() -> str:
    """$KAFKA_CANARY_RUNS (a path, file://… or s3://bucket/prefix), else ~/.local/state/kafka-canary/rollouts."""
    return os.environ.get(RUNS_ENV) or DEFAULT_RUNS


def runs_root() -> Path:
    """The runs' directory when they are on this disk (the embedded default)."""
    return Path(runs_url()).expanduser()


def run_store(location: str | Path | Store | None, run_id: str) -> Store:
    """The storage of run `run_id`: `location` (a run directory, a URL or a store) or its place under the runs'."""
    if isinstance(location, Store):
        return location
    return open_store(location) if location else open_store(runs_url()).child(run_id)


R = TypeVar("R", bound=RunRecord)


class RunState(Generic[R]):
    """The run's record (`record`, a RunRecord of the run's kind) and where it is stored. Every change is written at
    once, conditionally;
    a write that lost to another writer is merged (each keeps the fields and step records it changed) and written
    again."""

    def __init__(self, store: Store, record: R, version: str | None,
                 secrets: list[str] | tuple[str, ...] = ()):
        """`record`: of the run's kind (a RunRecord subclass); it is read back and merged as that kind's."""
        self.store = store
        self.run_dir = store.workdir()  # where this task writes its files; the store sends them on
        self.record = record
        self.version = version
        self._base = record.to_json()  # as last read or written: what this task changed is what differs
        self.secrets = tuple(secrets)  # values cut out of run.json, should any text quote one
        # A run under the runs' root keeps its row of the runs index (canary.rollout.core.index) current.
        self.index = RunsIndex(store.parent) if store.parent is not None else None
        self._indexed: IndexEntry | None = None

    @classmethod
    def open(cls, location: str | Path | Store, run_id: str, spec: dict,
             secrets: list[str] | tuple[str, ...] = (), record: type[R] = RunRecord) -> RunState[R]:  # type: ignore[assignment]
        """The run at `location`, created when new. Refuses a place holding anything else (`existing`) before
        anything is written there. `secrets`: values that must never be written (the client's passwords).
        `record`: the kind's record (canary.rollout.broker.record.BrokerRunRecord, …)."""
        store = run_store(location, run_id)
        found = existing(store, run_id, spec, record)
        if found is not None:
            return cls(store, found[0], found[1], secrets)
        state = cls(store, record(run_id=run_id, created_ms=int(time.time() * 1000), spec=_as_stored(spec)), None,
                    secrets)
        try:
            state.save(merge=False)
        except Conflict:  # another task created it at the same moment: open what it wrote
            return cls.open(store, run_id, spec, secrets, record)
        return state

    @property
    def run_id(self) -> str:
        return self.record.run_id

    @property
    def status(self) -> RunStatus:
        return self.record.status

    @property
    def verdict(self) -> Verdict | None:
        return self.record.verdict

    @property
    def window(self) -> Window | None:
        return self.record.window

    @property
    def before(self) -> Snapshot | None:
        return self.record.before

    @property
    def snapshot(self) -> Snapshot:
        """The pre-rollout snapshot (`before`) the steps after preflight work from (of the run's kind: the kind's
        run narrows it, e.g. canary.rollout.broker.rollout.Rollout.snapshot)."""
        if self.record.before is None:
            raise RunStateError(f"rollout {self.run_id} has no pre-rollout snapshot yet: preflight takes it")
        return self.record.before

    def save(self, merge: bool = True) -> None:
        for _ in range(MERGE_ATTEMPTS):
            mine = self.record.to_json()
            text = scrub_text(json.dumps(mine, indent=2, default=str), self.secrets) + "\n"
            try:
                self.version = self.store.write_if(RUN_FILE, text.encode(), self.version)
                self._base = mine
                self._index_row()
                return
            except Conflict:
                if not merge:
                    raise
                found = self.store.read_versioned(RUN_FILE)
                if found is None:
                    raise RunStateError(f"{self.store.url}/{RUN_FILE} vanished while rollout {self.run_id} "
                                        f"ran") from None
                kind = type(self.record)
                theirs = _parse(self.store, found[0], kind).to_json()
                self.record, self.version = kind.load(_merge(self._base, mine, theirs)), found[1]
                self._base = theirs
        raise RunStateError(f"{self.store.url}/{RUN_FILE} kept changing under rollout {self.run_id}: "
                            f"{MERGE_ATTEMPTS} writes in a row lost; is another rollout writing to the same run?")

    def _index_row(self) -> None:
        """The run's row of the runs index, written when it changed; a failure is logged, never raised: the index
        is derived from the run.json files and made again from them."""
        if self.index is None:
            return
        entry = IndexEntry.of(self.record)
        if entry == self._indexed:
            return
        try:
            self.index.put(entry)
            self._indexed = entry
        except (OSError, CanaryError) as exc:
            log.warning("the runs index was not updated for rollout %s: %s", self.run_id, exc)

    def started_by(self, origin: Origin) -> None:
        """Records what started the run, once: the first step of a run says it, later ones (retries, the next
        tasks) find it said."""
        if self.record.origin is None:
            self.update(origin=origin)

    def ran_in(self, task: str, since_ms: int) -> None:
        """Names `task` (the orchestrator's task) as where the steps started since `since_ms` ran: the report links
        each step to its task's log."""
        ran = [step for step in self.record.steps.values()
               if step.started_ms is not None and step.started_ms >= since_ms and step.task != task]
        for step in ran:
            step.task = task
        if ran:
            self.save()

    def update(self, **fields: object) -> None:
        """Sets the record's `fields` (models, or their JSON-able form) and writes it."""
        for name, value in fields.items():
            setattr(self.record, name, value)
        self.save()

    def step_started(self, name: str) -> int:
        record = self.record.steps.setdefault(name, StepRecord())
        record.status, record.attempts = StepStatus.RUNNING, record.attempts + 1
        record.started_ms = int(time.time() * 1000)
        self.save()
        return record.attempts

    def step_finished(self, name: str, result: dict) -> None:
        record = self.record.steps[name]
        record.status, record.finished_ms, record.result, record.error = (
            StepStatus.DONE, int(time.time() * 1000), result, None)
        self.save()

    def step_failed(self, name: str, error: str, infrastructure: bool = False) -> None:
        record = self.record.steps[name]
        record.status, record.finished_ms, record.error = StepStatus.FAILED, int(time.time() * 1000), error
        record.infrastructure = infrastructure or None
        self.save()

    def step_done(self, name: str) -> bool:
        return self.record.step_done(name)


def existing(store: Store, run_id: str, spec: dict, kind: type[R] = RunRecord  # type: ignore[assignment]
             ) -> tuple[R, str] | None:
    """The run `run_id` of `spec` already at `store` (its record and version), None when the place is new or empty.
    Anything else is refused with RunStateError before anything is written there: a file where a directory should
    be, files or objects that are no run of ours (a run directory is never shared with anything: its report.html
    and audit.jsonl would overwrite or extend theirs), a run.json not of our schema, another run, another spec."""
    held = store.names()  # StoreError for a place that holds no files (a file, a device) or cannot be read
    if not held:
        return None
    try:
        found = store.read_versioned(RUN_FILE)
    except OSError as exc:  # run.json a folder, unreadable
        raise RunStateError(f"run directory {store.url}: cannot read its {RUN_FILE} ({exc.strerror or exc}); use "
                            f"another --run-dir") from None
    if found is None:
        shown = ", ".join(held[:3]) + (", …" if len(held) > 3 else "")
        raise RunStateError(f"run directory {store.url} already holds files that are no run of kafka-canary's "
                            f"({shown}) and no run.json; a run directory must be new, empty or a run of "
                            f"kafka-canary's, so nothing of its own is overwritten: use another --run-dir")
    record = _parse(store, found[0], kind)
    if record.run_id != run_id:
        raise RunStateError(f"{store.url} holds rollout {record.run_id}, not {run_id}; use another --run-dir")
    if record.spec != _as_stored(spec):
        raise RunStateError(f"{store.url} holds rollout {run_id} with a different spec; a changed rollout "
                            f"needs a new run_id (or another --run-dir)")
    return record, found[1]


def _as_stored(spec: dict) -> dict:
    return json.loads(json.dumps(spec, default=str))  # as run.json keeps it: tuples become lists


def _parse(store: Store, raw: bytes, kind: type[R] = RunRecord) -> R:  # type: ignore[assignment]
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise RunStateError(f"{store.url}/{RUN_FILE} is not JSON ({exc}): no run of kafka-canary's, or one damaged "
                            f"outside it; use another --run-dir") from None
    if not isinstance(data, dict) or "schema" not in data or "run_id" not in data:
        raise RunStateError(f"{store.url}/{RUN_FILE} is no run of kafka-canary's (it has no schema and run_id); a run "
                            f"directory must be new, empty or a run of kafka-canary's: use another --run-dir")
    if data.get("schema") not in READABLE_SCHEMAS:
        schema = data.get("schema")
        newer = isinstance(schema, int) and schema > SCHEMA
        raise RunStateError(f"{store.url}/{RUN_FILE} has schema {schema}; this kafka-canary reads "
                            f"{', '.join(map(str, READABLE_SCHEMAS))}" + (
            ": it was written by a newer kafka-canary, upgrade this one (every worker runs the same version)"
            if newer else ""))
    try:
        return kind.load(data)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()[:5])
        raise RunStateError(f"{store.url}/{RUN_FILE} is not a run of kafka-canary's schema {data['schema']} "
                            f"({problems}); it was changed outside kafka-canary, or written by another version: use "
                            f"another --run-dir") from None


def _merge(base: dict, mine: dict, theirs: dict) -> dict:
    """`theirs` with what this task changed since `base` laid over it: whole fields, and each step's record on its
    own (two tasks finishing different steps both keep theirs; a retried step keeps the latest try's record)."""
    merged = copy.deepcopy(theirs)
    for key, value in mine.items():
        if key == "steps":
            for name, record in value.items():
                if record != base.get("steps", {}).get(name):
                    merged.setdefault("steps", {})[name] = copy.deepcopy(record)
        elif value != base.get(key):
            merged[key] = copy.deepcopy(value)
    return merged
