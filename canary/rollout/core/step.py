"""The step contract. A step is a function over a rollout run that reads the real state (cluster, fleet, run state),
converges towards what it promises and returns a small JSON-able result; re-running it does only what is still
missing, so a retried task or a resumed rollout does no harm. `Step` wraps it: attempts counted in run.json,
start/finish/failure in the audit log, and no secret value in the result."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from canary.errors import CanaryError, InfrastructureError
from canary.judge import ROLLBACK
from canary.kafka.secrets import scrub_text
from canary.kafka.wait import describe
from canary.rollout.core.audit import AuditAction

if TYPE_CHECKING:
    from canary.rollout.core.record import Verdict
    from canary.rollout.core.rollout import RolloutRun


class RolloutError(CanaryError):
    """A step cannot go on; the message says why and what to do."""


class SpecMismatch(RolloutError):
    """The spec asks for what this cluster cannot be (a broker it does not have, a topic it lacks, a program that is
    not there): a configuration mistake, found before any change. The command exits 2 (fix the spec and run again),
    not 4 (the run's own state or infrastructure)."""


def rollback_decided(rollout: RolloutRun) -> Verdict | None:
    """The run's verdict when it is ROLLBACK (the gate's, or a failure after the first change), else None. From then
    on the run only goes back: no step may change the cluster towards the change again, nor judge again."""
    verdict = rollout.state.verdict
    return verdict if verdict is not None and verdict.verdict == ROLLBACK else None


@dataclass(frozen=True)
class Step:
    """One step of a rollout kind.

    name: as the CLI, the audit log and run.json name it. run: the converging function, (run, **options) -> dict.
    help: one line for the CLI. after_change: the step runs once the cluster may have been changed, so its failure
    means ROLLBACK (the way back is safe); a failure before that changes nothing and is only reported.
    decides: its result carries a verdict, and the CLI exits by it.
    after_rollback: the step may run once the run decided ROLLBACK (rollback and verify, which finish it; a step
    that judges for itself whether it may). Any other step is then refused, whoever calls it (`run` resuming, a
    per-step command, an Airflow task), and one that decides repeats the recorded verdict instead of judging again:
    a decided rollback is only ever finished, never undone by a new verdict."""

    name: str
    run: Callable[..., dict]
    help: str
    after_change: bool = False
    decides: bool = False
    after_rollback: bool = False

    def __call__(self, rollout: RolloutRun, **options: Any) -> dict:
        rollout.step = self.name
        decided = None if self.after_rollback else rollback_decided(rollout)
        if decided is not None and not self.decides:
            rollout.audit.record(self.name, AuditAction.STEP_REFUSED, why=f"the run decided {ROLLBACK}")
            reason = " ".join(decided.reason.split())  # one line, whatever the failure quoted
            raise RolloutError(f"rollout {rollout.run_id} decided {ROLLBACK} ({reason}), so {self.name} may not "
                               f"run: the run can only finish its rollback (`run` resumes it; or the rollback step, "
                               f"then verify)")
        attempt = rollout.state.step_started(self.name)
        rollout.audit.record(self.name, AuditAction.STEP_STARTED, attempt=attempt)
        try:
            result = decided.to_dict() if decided is not None else self.run(rollout, **options)
            if rollout.secret_values:  # the result lands in XCom and on the CLI's output: never a password
                result = json.loads(scrub_text(json.dumps(result, default=str), rollout.secret_values))
        except BaseException as exc:
            rollout.store.push(rollout.run_dir)
            rollout.state.step_failed(self.name, describe(exc), isinstance(exc, InfrastructureError))
            rollout.audit.record(self.name, AuditAction.STEP_FAILED, attempt=attempt, error=describe(exc))
            raise
        # The step's files first, then its record: a task that sees the step done finds what it wrote.
        rollout.store.push(rollout.run_dir)
        rollout.state.step_finished(self.name, result)
        rollout.audit.record(self.name, AuditAction.STEP_FINISHED, attempt=attempt, result=result)
        return result
