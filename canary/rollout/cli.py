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

from canary.rollout.broker import BROKER
from canary.rollout.core import ERROR_EXIT, EXIT, RolloutKind, RolloutRun, run_all
from canary.rollout.core.lock import ClusterLock
from canary.rollout.core.report import write_report
from canary.rollout.deployer import open_deployer

SPEC_HELP = "the rollout spec (YAML or JSON)"


def add_commands(rsub, kind: RolloutKind, spec_help: str = SPEC_HELP) -> Callable[[argparse.ArgumentParser], None]:
    """`run`, and one subcommand per step of `kind` when its steps can run one at a time; returns the function that
    adds --spec/--run-dir/--json to a parser."""

    def common(q) -> None:
        q.add_argument("--spec", required=True, help=spec_help)
        q.add_argument("--run-dir", help="state, audit log and report of this run (default rollouts/<run_id>, "
                                         "or $KAFKA_CANARY_RUNS/<run_id>)")
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


def open_run(args) -> RolloutRun:
    # Secrets may come from the environment rather than the spec file: KAFKA_CANARY_CLIENT_SASL_PASSWORD, …
    return args.kind.open(args.spec, args.run_dir, environ=dict(os.environ))


def register(sub) -> None:
    p = sub.add_parser("rollout", help="gated broker rollout: canary brokers, probe, gate, promote or rollback",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    rsub = p.add_subparsers(dest="rollout_command", required=True)
    common = add_commands(rsub, BROKER)
    status = rsub.add_parser("status", help="the run's state: steps, verdict, lock holder")
    common(status)
    status.set_defaults(func=cmd_status, kind=BROKER)
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


def print_result(args, result: dict) -> None:
    print(json.dumps(result, indent=2, default=str) if args.json else
          "\n".join(f"{k}: {v}" for k, v in result.items()))


def cmd_run(args) -> int:
    _logging()
    kind: RolloutKind = args.kind
    result = run_all(kind, open_run(args), approve=args.approve, on_inconclusive=args.on_inconclusive)
    print_result(args, result)
    return EXIT[result["outcome"]]


def cmd_step(args) -> int:
    _logging()
    step = args.kind.step(args.step)
    rollout = open_run(args)
    try:
        result = step(rollout, approve=args.approve) if step is args.kind.promote else step(rollout)
    finally:
        write_report(rollout.state, rollout.audit)
    print_result(args, result)
    return EXIT.get(result["verdict"], ERROR_EXIT) if step.decides else 0


def cmd_status(args) -> int:
    rollout = open_run(args)
    data = rollout.state.data
    result = {"run_id": data["run_id"], "status": data["status"], "canary_brokers": data["canary_brokers"],
              "verdict": data["verdict"], "steps": {k: v["status"] for k, v in data["steps"].items()},
              "lock_holder": rollout.lock.holder()}
    print_result(args, result)
    return 0


def cmd_unlock(args) -> int:
    spec = BROKER.load_spec(args.spec, dict(os.environ))
    lock = ClusterLock(open_deployer(spec.deployer, spec.cluster_dir).bootstrap_servers, spec.client)
    holder = lock.holder()
    if not args.force:
        print(f"the lock is held by {holder}; pass --force to break it (only when that rollout is dead)"
              if holder is not None else "the cluster is not locked", file=sys.stderr)
        return 2 if holder is not None else 0
    removed = lock.force_release()
    print_result(args, {"removed": removed})
    return 0
