"""The KIP-848 migration canary as a kind of the rollout core, and its whole run (`run_migration`).

Its steps follow the core's step contract, but they are not separate commands: from the join on, every step works
on the instances (child processes) this process started, so a run's steps run only together, through the engine's
`run_all`, in one process (`step_by_step=False`: no per-step CLI commands and no Airflow operators). Nothing of a
run outlives its process: whatever happens, every instance is closed (committing and leaving the group) and the
cluster lock released at the end. Hence no step is `after_change` for the engine: a failed step is an error (exit
2), not a ROLLBACK verdict, and the way back, closing the instances, is taken anyway. The action after the verdict
may be a person's choice made beforehand (the spec's `action`), since nobody can decide in a later command.
"""

from __future__ import annotations

from pathlib import Path

from canary.rollout.core import RolloutKind, Step, run_all
from canary.rollout.migration import steps
from canary.rollout.migration.run import MigrationRun
from canary.rollout.migration.spec import MigrationSpec, load_migration_spec


def _open(spec: MigrationSpec, run_dir: str | Path | None = None) -> MigrationRun:
    """The run of `spec`; its run storage is the spec's out_dir (or `run_dir`, which then becomes it)."""
    return MigrationRun(spec if run_dir is None else spec.model_copy(update={"out_dir": str(run_dir)}))


MIGRATION = RolloutKind(
    name="migration", command="migrate-protocol",
    steps=(Step("preflight", steps.preflight_step,
                "check group.version, the brokers' group settings, the topic and the group; lock"),
           Step("join", steps.join_step, "baseline instances on classic, then the canary instances on consumer"),
           Step("window", steps.window_step, "steady traffic; one baseline instance restarts"),
           Step("judge", steps.judge_step, "rebalance disruption per lane, lag and processing time: the verdict",
                decides=True)),
    # A person's choice made beforehand (the spec's action: promote) may promote a ROLLBACK verdict: the promote step
    # judges for itself whether it may. A run never resumes in another process, so nothing is left to finish.
    promote=Step("promote", steps.promote_step, "baseline instances to consumer, one at a time", after_rollback=True),
    rollback=Step("rollback", steps.rollback_step, "canary instances back to classic, one at a time",
                  after_rollback=True),
    verify=Step("verify", steps.verify_step, "every instance on the promised protocol, every record consumed; unlock",
                after_rollback=True),
    load_spec=load_migration_spec, open_run=_open, step_by_step=False)


def run_migration(spec: MigrationSpec) -> dict:
    """Preflight, join, window, judge, promote or roll back, verify. Returns the result (also out_dir/result.json;
    run.json, audit.jsonl and report.html beside it). Raises MigrationRefused before anything started,
    MigrationError (or the core's RolloutError) when a step fails; every instance is closed, the producer stopped
    and the lock released either way. A verified run in out_dir is not run again: its result is returned."""
    run = _open(spec)
    try:
        run_all(MIGRATION, run, decided=None if spec.action == "auto" else spec.action)
    finally:
        run.close()
    return run.result
