"""The step contract. A step is a function over a rollout run that reads the real state (cluster, fleet, run state),
converges towards what it promises and returns a small JSON-able result; re-running it does only what is still
missing, so a retried task or a resumed rollout does no harm. `Step` wraps it: attempts counted in run.json,
start/finish/failure in the audit log, and no secret value in the result."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from canary.errors import CanaryError
from canary.kafka.secrets import scrub_text
from canary.kafka.wait import describe

if TYPE_CHECKING:
    from canary.rollout.core.rollout import RolloutRun


class RolloutError(CanaryError):
    """A step cannot go on; the message says why and what to do."""


@dataclass(frozen=True)
class Step:
    """One step of a rollout kind.

    name: as the CLI, the audit log and run.json name it. run: the converging function, (run, **options) -> dict.
    help: one line for the CLI. after_change: the step runs once the cluster may have been changed, so its failure
    means ROLLBACK (the way back is safe); a failure before that changes nothing and is only reported.
    decides: its result carries a verdict, and the CLI exits by it."""

    name: str
    run: Callable[..., dict]
    help: str
    after_change: bool = False
    decides: bool = False

    def __call__(self, rollout: RolloutRun, **options: Any) -> dict:
        rollout.step = self.name
        attempt = rollout.state.step_started(self.name)
        rollout.audit.record(self.name, "step started", attempt=attempt)
        try:
            result = self.run(rollout, **options)
            if rollout.secret_values:  # the result lands in XCom and on the CLI's output: never a password
                result = json.loads(scrub_text(json.dumps(result, default=str), rollout.secret_values))
        except BaseException as exc:
            rollout.store.push(rollout.run_dir)
            rollout.state.step_failed(self.name, describe(exc))
            rollout.audit.record(self.name, "step failed", attempt=attempt, error=describe(exc))
            raise
        # The step's files first, then its record: a task that sees the step done finds what it wrote.
        rollout.store.push(rollout.run_dir)
        rollout.state.step_finished(self.name, result)
        rollout.audit.record(self.name, "step finished", attempt=attempt, result=result)
        return result
