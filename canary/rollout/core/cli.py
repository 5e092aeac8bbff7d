"""The command line every rollout kind shares: `run` (all steps, resuming where a run stopped) and one subcommand
per step, each printing its small JSON result. A kind's own CLI module adds these to its subcommand and may add
commands of its own.

Exit codes (canary.outcome): `run` 0 promoted and verified, 1 rolled back and verified, 3 a person must decide
(INCONCLUSIVE with --on-inconclusive stop), 4 the run stopped unfinished (a step failed or was refused, the lock,
the storage or the cluster could not be used: the same command goes on from there), 2 an error before the run
existed (a usage mistake, the spec or the run directory refused). A step that decides (the gate) 0/1/3 by verdict;
other steps 0 done; either 4 when the step fails and 2 as above.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Callable

from canary.errors import CanaryError
from canary.judge import Brief
from canary.outcome import Outcome
from canary.rollout.core.engine import roll_back, run_all
from canary.rollout.core.kind import RolloutKind
from canary.rollout.core.record import Origin
from canary.rollout.core.rollout import RolloutRun
from canary.rollout.core.step import SpecMismatch

SPEC_HELP = "the rollout spec (YAML or JSON)"


class RunUnfinished(CanaryError):
    """A run stopped before it was verified because of an error of the tool or its infrastructure, not a verdict:
    the command exits UNFINISHED (4). The message is the error's (which says what to do) and where the run is."""

    exit_code = Outcome.UNFINISHED.exit_code

    @classmethod
    def of(cls, rollout: RolloutRun, exc: BaseException) -> RunUnfinished:
        made = SpecRefused if isinstance(exc, SpecMismatch) else cls
        return made(f"{exc} (rollout {rollout.run_id} stopped unfinished at '{rollout.state.status}')")


class SpecRefused(RunUnfinished):
    """The run stopped on a mistake in its spec (SpecMismatch) before any change: exit 2, as a spec refused outright."""

    exit_code = Outcome.ERROR.exit_code


def add_commands(rsub, kind: RolloutKind, spec_help: str = SPEC_HELP) -> Callable[[argparse.ArgumentParser], None]:
    """`run`, and one subcommand per step of `kind` when its steps can run one at a time; returns the function that
    adds --spec/--run-dir/--json to a parser."""

    def common(q) -> None:
        q.add_argument("--spec", required=True, help=spec_help)
        q.add_argument("--run-dir", help="state, audit log and report of this run (default "
                                         "$KAFKA_CANARY_RUNS/<run_id>, else "
                                         "~/.local/state/kafka-canary/rollouts/<run_id>)")
        q.add_argument("--json", action="store_true", help="print the result as JSON")

    run = rsub.add_parser("run", help="all steps, printing progress (a second run resumes where the first stopped)")
    common(run)
    run.add_argument("--approve", action="store_true", help="promote on an INCONCLUSIVE verdict")
    run.add_argument("--on-inconclusive", choices=("rollback", "stop"), default="rollback",
                     help="INCONCLUSIVE without --approve: roll back (default) or stop for a person (exit 3)")
    run.set_defaults(func=cmd_run, kind=kind)
    for step in kind.all_steps if kind.step_by_step else ():
        q = rsub.add_parser(step.name, help=step.help)
        common(q)
        if step is kind.promote:
            q.add_argument("--approve", action="store_true", help="promote on an INCONCLUSIVE verdict")
        q.set_defaults(func=cmd_step, step=step.name, kind=kind)
    return common


def run_status(rollout: RolloutRun) -> dict:
    """What `status` shows of any kind's run: its state, outcome, verdict, each step's status, the lock's holder."""
    record = rollout.state.record
    return {"run_id": record.run_id, "status": record.status, "outcome": record.outcome(),
            "verdict": record.verdict.to_dict() if record.verdict else None,
            "steps": {name: step.status for name, step in record.steps.items()}, "lock_holder": rollout.lock.holder()}


def open_run(args) -> RolloutRun:
    # Secrets may come from the environment rather than the spec file: KAFKA_CANARY_CLIENT_SASL_PASSWORD, …
    return args.kind.open(args.spec, args.run_dir, environ=dict(os.environ))


def started_here(rollout: RolloutRun) -> RolloutRun:
    """The run, recorded as started from the command line unless something else started it."""
    rollout.state.started_by(Origin(trigger="cli", by=os.environ.get("USER") or None))
    return rollout


def _logging() -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s", "%H:%M:%S"))
    logger = logging.getLogger("canary.rollout")
    if not logger.handlers:
        logger.addHandler(handler)
    logger.setLevel(logging.INFO)


def print_result(args, result: dict) -> None:
    print(json.dumps(result, indent=2, default=str) if args.json else
          "\n".join(f"{k}: {v}" for k, v in result.items()))


def cmd_run(args) -> int:
    _logging()
    kind: RolloutKind = args.kind
    rollout = started_here(open_run(args))  # a spec or a run directory refused here is an error before any run (2)
    try:
        summary = run_all(kind, rollout, approve=args.approve, on_inconclusive=args.on_inconclusive)
    except (CanaryError, OSError) as exc:
        raise RunUnfinished.of(rollout, exc) from exc
    print_result(args, summary.to_dict())
    return summary.exit_code


def cmd_step(args) -> int:
    _logging()
    step = args.kind.step(args.step)
    rollout = started_here(open_run(args))
    try:
        if step is args.kind.promote:
            result = step(rollout, approve=args.approve)
        else:  # a failed rollback says what it left behind and how to go on, as `run` does
            result = roll_back(args.kind, rollout) if step is args.kind.rollback else step(rollout)
    except (CanaryError, OSError) as exc:
        raise RunUnfinished.of(rollout, exc) from exc
    finally:
        rollout.write_report()
    print_result(args, result)
    return Brief.of(result).outcome.exit_code if step.decides else 0
