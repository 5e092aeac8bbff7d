"""What every rollout run has, whatever its kind: its spec, the run directory (state and audit log), a lock on the
cluster, and progress lines that name the step."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, ClassVar

from canary.rollout.core.admin import ClusterAdmin, KafkaAdmin
from canary.rollout.core.audit import AuditAction, AuditLog
from canary.rollout.core.lock import ClusterLock
from canary.rollout.core.record import RunRecord
from canary.rollout.core.run import RunState, existing, run_store
from canary.rollout.deployers.base import Deployer, Reporting
from canary.rollout.guard import PartitionView
from canary.storage import Store

log = logging.getLogger("canary.rollout")


class RolloutRun:
    """One run of a rollout. `spec` is the kind's spec: it has `effective_run_id`, `client` (librdkafka settings),
    `to_dict()` (secret-free) and `secret_values`. Subclasses say where the cluster is (`bootstrap_servers`)."""

    LOG_PREFIX = ""  # before the step's name in progress lines
    RECORD: ClassVar[type[RunRecord]] = RunRecord  # the kind's record (run.json), which a kind's run names
    state: RunState[Any]

    def __init__(self, spec: Any, run_dir: str | Path | Store | None = None):
        self.spec = spec
        self.run_id: str = spec.effective_run_id
        self.store = run_store(run_dir, self.run_id)
        self.state = RunState.open(self.store, self.run_id, spec.to_dict(), spec.secret_values, self.RECORD)
        self.run_dir = self.state.run_dir
        self.store.pull(self.run_dir)  # the files earlier tasks left (on another worker, when the store is shared)
        self.audit = AuditLog(self.store, self.run_id, spec.secret_values)
        self.lock = ClusterLock(self.bootstrap_servers, spec.client)
        self.step = "-"

    @property
    def bootstrap_servers(self) -> str:
        raise NotImplementedError

    @property
    def secret_values(self) -> list[str]:
        return self.spec.secret_values

    def relative(self, path: str | Path) -> str:
        """A file of this run as run.json records it: relative to the run, so that a task on another machine finds
        it in its own work directory (the store brings it there)."""
        path = Path(path)
        return path.relative_to(self.run_dir).as_posix() if path.is_relative_to(self.run_dir) else str(path)

    def local(self, recorded: str) -> Path:
        """The file run.json records, in this task's work directory (an absolute path stays as it is)."""
        return self.run_dir / recorded

    def say(self, text: str, *args: Any) -> None:
        log.info(f"[{self.LOG_PREFIX}%s] " + text, self.step, *args)

    def write_report(self) -> Path:
        """Writes the run's report (canary.rollout.report, with the sections of the run's kind); the kind's run
        says which."""
        raise NotImplementedError

    def progress(self, line: str) -> None:
        """A waiting step's progress line (canary.kafka.wait)."""
        self.say("%s", line)


class ClusterRun(RolloutRun):
    """A run on a cluster whose brokers a deployer runs (the broker and the client rollout). Its steps reach the
    cluster through two ports: the deployer (its nodes) and `admin` (its metadata, elections, features)."""

    def __init__(self, spec: Any, run_dir: str | Path | Store | None = None, deployer: Deployer | None = None,
                 admin: ClusterAdmin | None = None):
        store = run_store(run_dir, spec.effective_run_id)
        # a run directory it may not use: refused first
        existing(store, spec.effective_run_id, spec.to_dict(), self.RECORD)
        self.deployer = deployer or spec.cluster.open_deployer(spec.client)
        self.admin: ClusterAdmin = admin or KafkaAdmin(self.deployer.bootstrap_servers, spec.client)
        super().__init__(spec, store)
        if isinstance(self.deployer, Reporting):  # its commands go into this run's audit log, under the step
            self.deployer.report_to(
                lambda action, details: self.audit.record(self.step, AuditAction(action), **details))

    @property
    def bootstrap_servers(self) -> str:
        return self.deployer.bootstrap_servers

    def partitions(self) -> list[PartitionView]:
        """The partitions this kind's leadership steps select from, as the safe-roll guard sees them."""
        raise NotImplementedError
