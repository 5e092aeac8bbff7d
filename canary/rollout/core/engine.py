"""The whole rollout of any kind, resumable: a step already done in this run is not repeated; the verdict decides
promote or rollback; a failure after the first change rolls back, whatever raised it (a refused step or a bug in
the judge alike); a failure during promote stops and says how to go on. A run that decided ROLLBACK only ever
finishes its rollback when resumed: nothing before the verdict runs again, so no new verdict can promote it; a
rollback that fails says what it left behind, that the lock is held, and what to do."""

from __future__ import annotations

import contextlib

from canary.errors import CanaryError, InfrastructureError
from canary.judge import INCONCLUSIVE, PROMOTE
from canary.kafka.wait import describe
from canary.rollout.core.kind import RolloutKind
from canary.rollout.core.record import RunSummary
from canary.rollout.core.rollout import RolloutRun
from canary.rollout.core.step import RolloutError, rollback_decided
from canary.rollout.core.verdict import failure_verdict, rolls_back


def run_all(kind: RolloutKind, rollout: RolloutRun, approve: bool = False, on_inconclusive: str = "rollback",
            decided: str | None = None) -> RunSummary:
    """Runs every step still to do. `on_inconclusive`: "rollback" (the safe default) or "stop" (leave the canary in
    place for a person; the result says so, and `promote --approve` or `rollback` continues). `decided`: "promote"
    or "rollback" when a person chose before the verdict, for a kind whose canary cannot wait for a later command
    (the migration canary's instances live in this process): the verdict is still reached and recorded, then the
    choice is carried out (the kind's promote step says whether it may).
    Returns the run's summary: its outcome by its status (PROMOTE or ROLLBACK once verified, INCONCLUSIVE when it
    stopped for a person), the verdict and reason, a note, where its files are. An error that stops the run is
    raised (the run is then UNFINISHED: RunStatus.outcome)."""
    state = rollout.state
    if state.status.verified:
        return result(rollout, "the rollout had already finished")
    going_back = rollback_decided(rollout) is not None  # decided by an earlier run: only its rollback is left
    try:
        if not going_back:
            _until_verdict(kind, rollout)
        if not state.status.finished:
            verdict = state.verdict.verdict if state.verdict else None
            if not going_back and (decided == "promote" or (decided is None and (
                    verdict == PROMOTE or (verdict == INCONCLUSIVE and approve)))):
                kind.promote(rollout, approve=approve)
            elif not going_back and decided is None and verdict == INCONCLUSIVE and on_inconclusive == "stop":
                return result(rollout, f"a person must decide: `kafka-canary {kind.command} promote --approve` or "
                                       f"`kafka-canary {kind.command} rollback`, then `verify`")
            else:
                roll_back(kind, rollout)
        kind.verify(rollout)
        return result(rollout, "")
    finally:
        with contextlib.suppress(CanaryError, OSError):
            rollout.write_report()


def roll_back(kind: RolloutKind, rollout: RolloutRun) -> dict:
    """The kind's rollback step. When it fails and the kind can tell what is left behind, raises RolloutError saying
    what failed, which nodes are not back (as the deployer describes them now), that the cluster lock is still held,
    and how to go on; the CLI's `run` and `rollback` and the Airflow rollback task all end so."""
    try:
        return kind.rollback(rollout)
    except Exception as exc:
        if kind.left_behind is None:
            raise
        raise RolloutError(rollback_failed(kind, rollout, describe(exc))) from exc


def rollback_failed(kind: RolloutKind, rollout: RolloutRun, error: str) -> str:
    """One line: the rollback's error, what is not back, the lock still held, what to do next."""
    try:
        left = kind.left_behind(rollout) if kind.left_behind else []
        shown = (f"not back as before the rollout: {'; '.join(left)}" if left else
                 "every node is described as before the rollout, but the rollback did not finish")
    except Exception as exc:  # the describe failing too (a host unreachable): say so, and the rest still holds
        shown = f"what the nodes are now is unknown: describing them failed too ({describe(exc)})"
    command = f"kafka-canary {kind.command}"
    text = (f"rollback of rollout {rollout.run_id} failed: {error}; {shown}; the cluster lock is still held by this "
            f"rollout, so no other rollout can start. Fix what failed, then run `{command} run` (or `{command} "
            f"rollback`, then `{command} verify`) with the same spec and run directory to finish the rollback; break "
            f"the lock (`kafka-canary rollout unlock --spec FILE --force`) only after that, once the cluster is back "
            f"as before")
    return " ".join(text.split())  # one line, whatever the error quoted


def _until_verdict(kind: RolloutKind, rollout: RolloutRun) -> None:
    state = rollout.state
    for step in kind.steps:
        if state.step_done(step.name) or state.status.finished:
            continue
        try:
            step(rollout)
        except Exception as exc:  # a refusal or a bug alike: once something changed, the way back is safe
            if not rolls_back(step, rollout):
                raise  # nothing was changed
            rollout.say("%s failed (%s); rolling back", step.name, describe(exc))
            failure_verdict(rollout, step.name, describe(exc), isinstance(exc, InfrastructureError))
            return
        if state.window is not None and state.window.stopped_early is not None:
            return  # the window already decided (fail fast): nothing is left to analyse


def result(rollout: RolloutRun, note: str) -> RunSummary:
    """The run's summary as its record says (canary.rollout.core.record.RunRecord.summary)."""
    return rollout.state.record.summary(str(rollout.run_dir), str(rollout.run_dir / "report.html"), note)
