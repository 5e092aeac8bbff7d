"""`kafka-canary rollout …`: the whole gated broker rollout (`run`) or one step at a time, each idempotent.

The cluster's client settings are the spec's `cluster.client`; `KAFKA_CANARY_CLIENT_<KEY>` environment variables add
or override them (KAFKA_CANARY_CLIENT_SASL_PASSWORD for sasl.password), so no password need be in the spec file.

Exit codes: `run` 0 promoted and verified, 1 rolled back and verified, 3 a person must decide (INCONCLUSIVE
with --on-inconclusive stop), 2 error. `gate` 0/1/3 by verdict. Other steps 0 done, 2 error.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from canary.rollout import steps
from canary.rollout.engine import EXIT, run_rollout
from canary.rollout.lock import ClusterLock
from canary.rollout.report import write_report
from canary.rollout.spec import load_spec
from canary.rollout.steps import Rollout

STEPS = {
    "preflight": (steps.preflight, "check health, features, lock, baseline probe; record the pre-rollout state"),
    "deploy-canary": (steps.deploy_canary, "roll the canary brokers to the change, one at a time, under the guard"),
    "warm-up": (steps.warm_up, "wait until every canary broker is back in the ISR of its partitions"),
    "lead": (steps.lead, "move leadership of canary partitions to the canary brokers"),
    "probe-window": (steps.probe_window, "probe for the window with interim looks (fail fast)"),
    "judge": (steps.judge_window, "the final analysis of the window and its verdict (exit 0/1/3 by verdict)"),
    "gate": (steps.gate, "probe-window then judge (exit 0/1/3 by verdict)"),
    "promote": (steps.promote, "roll the rest of the fleet and the controllers, finalize, probe"),
    "rollback": (steps.rollback, "bring every changed broker back to the pre-rollout state"),
    "verify": (steps.verify, "check the promised state, probe, release the lock"),
}


@dataclass(frozen=True)
class Commands:
    """One kind of rollout on the command line: its steps (name -> (function, help)), how the rollout is built from
    the arguments, how all its steps run, and which steps exit by their verdict. The broker and the client rollout
    CLIs share the commands built from it (`run`, one per step)."""
    steps: dict[str, tuple[Callable, str]]
    open: Callable[[argparse.Namespace], Any]
    run_all: Callable[..., dict]
    exit: dict[str, int]
    verdict_steps: tuple[str, ...]
    spec_help: str


def add_commands(rsub, commands: Commands) -> Callable[[argparse.ArgumentParser], None]:
    """`run` and one subcommand per step; returns the function that adds --spec/--run-dir/--json to a parser."""

    def common(q) -> None:
        q.add_argument("--spec", required=True, help=commands.spec_help)
        q.add_argument("--run-dir", help="state, audit log and report of this run (default rollouts/<run_id>, "
                                         "or $KAFKA_CANARY_RUNS/<run_id>)")
        q.add_argument("--json", action="store_true", help="print the result as JSON")

    run = rsub.add_parser("run", help="all steps, printing progress (a second run resumes where the first stopped)")
    common(run)
    run.add_argument("--approve", action="store_true", help="promote on an INCONCLUSIVE verdict")
    run.add_argument("--on-inconclusive", choices=("rollback", "stop"), default="rollback",
                     help="INCONCLUSIVE without --approve: roll back (default) or stop for a person (exit 3)")
    run.set_defaults(func=cmd_run, commands=commands)
    for name, (_, text) in commands.steps.items():
        q = rsub.add_parser(name, help=text)
        common(q)
        if name == "promote":
            q.add_argument("--approve", action="store_true", help="promote on an INCONCLUSIVE verdict")
        q.set_defaults(func=cmd_step, step=name, commands=commands)
    return common


def _broker_rollout(args) -> Rollout:
    return Rollout(_spec(args), args.run_dir)


BROKER = Commands(STEPS, _broker_rollout, run_rollout, EXIT, ("gate", "judge"), "the rollout spec (YAML or JSON)")


def register(sub) -> None:
    p = sub.add_parser("rollout", help="gated broker rollout: canary brokers, probe, gate, promote or rollback",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    rsub = p.add_subparsers(dest="rollout_command", required=True)
    common = add_commands(rsub, BROKER)
    status = rsub.add_parser("status", help="the run's state: steps, verdict, lock holder")
    common(status)
    status.set_defaults(func=cmd_status)
    unlock = rsub.add_parser("unlock", help="break the cluster's rollout lock (only when its rollout is dead)")
    unlock.add_argument("--spec", required=True)
    unlock.add_argument("--force", action="store_true", help="required: you checked the holder is dead")
    unlock.add_argument("--json", action="store_true")
    unlock.set_defaults(func=cmd_unlock)


def _logging() -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s", "%H:%M:%S"))
    logger = logging.getLogger("canary.rollout")
    if not logger.handlers:
        logger.addHandler(handler)
    logger.setLevel(logging.INFO)


def _spec(args):
    # Secrets may come from the environment rather than the spec file: KAFKA_CANARY_CLIENT_SASL_PASSWORD, …
    return load_spec(args.spec, environ=dict(os.environ))


def print_result(args, result: dict) -> None:
    print(json.dumps(result, indent=2, default=str) if args.json else
          "\n".join(f"{k}: {v}" for k, v in result.items()))


def cmd_run(args) -> int:
    _logging()
    c: Commands = args.commands
    result = c.run_all(c.open(args), approve=args.approve, on_inconclusive=args.on_inconclusive)
    print_result(args, result)
    return c.exit[result["outcome"]]


def cmd_step(args) -> int:
    _logging()
    c: Commands = args.commands
    rollout = c.open(args)
    fn = c.steps[args.step][0]
    try:
        result = fn(rollout, approve=args.approve) if args.step == "promote" else fn(rollout)
    finally:
        write_report(rollout.state, rollout.audit)
    print_result(args, result)
    return c.exit.get(result["verdict"], 2) if args.step in c.verdict_steps else 0


def cmd_status(args) -> int:
    rollout = Rollout(_spec(args), args.run_dir)
    data = rollout.state.data
    result = {"run_id": data["run_id"], "status": data["status"], "canary_brokers": data["canary_brokers"],
              "verdict": data["verdict"], "steps": {k: v["status"] for k, v in data["steps"].items()},
              "lock_holder": rollout.lock.holder()}
    print_result(args, result)
    return 0


def cmd_unlock(args) -> int:
    spec = _spec(args)
    from canary.rollout.deployer import open_deployer

    lock = ClusterLock(open_deployer(spec.deployer, spec.cluster_dir).bootstrap_servers, spec.client)
    holder = lock.holder()
    if not args.force:
        print(f"the lock is held by {holder}; pass --force to break it (only when that rollout is dead)"
              if holder is not None else "the cluster is not locked", file=sys.stderr)
        return 2 if holder is not None else 0
    removed = lock.force_release()
    print_result(args, {"removed": removed})
    return 0
