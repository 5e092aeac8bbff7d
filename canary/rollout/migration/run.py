"""One migration canary run: a run of the rollout core (run.json, audit.jsonl and report.html in the spec's out_dir,
the cluster lock) with what only this process holds: the service's instances (MigrationSession) and result.json, the
run's whole result as tests and docs read it.

A migration run never resumes in another process: its instances are children of the process that started them.
Opening a directory that holds an unfinished run of the same spec starts that run over from preflight (the audit
log says so); a verified run is finished, and opening it again gives its result."""

from __future__ import annotations

import json
from pathlib import Path

from canary.errors import CanaryError
from canary.kafka.secrets import scrub_text
from canary.rollout.core import RolloutError, RolloutRun, RunStatus
from canary.rollout.core.audit import AuditAction
from canary.rollout.core.run import RUN_FILE, RunState
from canary.rollout.migration.record import MigrationRunRecord
from canary.rollout.migration.session import MigrationSession
from canary.rollout.migration.spec import MigrationError, MigrationSpec
from canary.rollout.report import write_report
from canary.storage import Store, open_store

RESULT_FILE = "result.json"


class MigrationRun(RolloutRun):
    """One migration canary run in `spec.out_dir`. `session`: the service's instances, from the join on; `result`: what
    result.json holds (written by preflight when it refuses, by judge and by verify)."""

    LOG_PREFIX = "migration "
    RECORD = MigrationRunRecord
    spec: MigrationSpec
    state: RunState[MigrationRunRecord]

    def __init__(self, spec: MigrationSpec):
        store = open_store(spec.out_dir)
        _refuse_another_run(store, spec.effective_run_id)
        super().__init__(spec, store)
        self.session: MigrationSession | None = None
        self.holds_lock = False
        self.result: dict = {}
        if self.state.status.verified:
            written = self.run_dir / RESULT_FILE
            self.result = json.loads(written.read_text()) if written.exists() else {}
        elif self.state.record.steps:
            self._start_over()

    @property
    def bootstrap_servers(self) -> str:
        return self.spec.bootstrap_servers

    def write_report(self) -> Path:
        return write_report(self.state, self.audit)

    def live_session(self) -> MigrationSession:
        """The instances this process started in the join; refuses when there is none."""
        if self.session is None:
            raise RolloutError(f"the {self.step} step needs the instances this process started in the join: a "
                               f"migration run's steps run together (`kafka-canary migrate-protocol`, or "
                               f"canary.rollout.migration.run_migration)")
        return self.session

    def write_result(self) -> Path:
        path = self.run_dir / RESULT_FILE
        path.write_text(scrub_text(json.dumps(self.result, indent=2, default=str), self.secret_values))
        return path

    def close(self) -> None:
        """Ends what this process holds, whatever happened: every instance and the producer, and the cluster lock if
        verify did not release it (nothing of the run outlives the process, so the lock has nothing left to guard,
        and a held lock would only block the next rollout)."""
        if self.session is not None:
            self.session.close()
            self.session = None
        if self.holds_lock:
            released = self.lock.release(self.run_id)
            self.holds_lock = False
            self.audit.record(self.step, AuditAction.LOCK_RELEASED_AT_EXIT if released else
                              AuditAction.LOCK_NOT_HELD)

    def _start_over(self) -> None:
        record = self.state.record
        self.audit.record("-", AuditAction.STARTED_OVER, earlier_status=record.status,
                          earlier_steps={name: step.status for name, step in record.steps.items()},
                          why="the instances of a migration run ended with the process that ran them")
        self.state.update(status=RunStatus.NEW, before=None, steps={}, verdict=None, window=None)


def _refuse_another_run(store: Store, run_id: str) -> None:
    """One run per output directory: another spec's run there is refused (its files would be overwritten)."""
    try:
        found = store.read(RUN_FILE) if store.names() else None
        held = json.loads(found).get("run_id") if found is not None else run_id
    except (CanaryError, OSError, ValueError, AttributeError):
        return  # not a directory, or no run of ours: the run state refuses it, saying why
    if held != run_id:
        raise MigrationError(f"{store.url} holds the migration run {held} of another spec; use another --out "
                             f"directory (this spec's run is {run_id})")
