"""`kafka-canary client-rollout …`: the gated rollout of a producer/consumer service's new version (`run`), one step
at a time (each idempotent), and the service fleet itself (`baseline`, `stop-fleet`).

Exit codes as for `kafka-canary rollout`: `run` 0 promoted and verified, 1 rolled back and verified, 3 a person must
decide (INCONCLUSIVE with --on-inconclusive stop), 2 error. Other commands 0 done, 2 error.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys

from canary.rollout import client_steps as steps
from canary.rollout.client_spec import load_client_spec
from canary.rollout.client_steps import EXIT, ClientRollout, run_client_rollout
from canary.rollout.report import write_report

STEPS = {
    "preflight": (steps.preflight, "check cluster, topic, canary broker, baseline fleet; record the state; lock"),
    "open-lane": (steps.open_lane, "make the planned partitions canary partitions (reorder replicas, elect)"),
    "deploy-canary": (steps.deploy_canary, "start the canary instances on the target version"),
    "window": (steps.window, "let traffic flow for the window, with interim looks (fail fast)"),
    "judge": (steps.judge_window, "the verdict of the window (exit 0/1/3 by verdict)"),
    "promote": (steps.promote, "baseline instances to the target one at a time, close the lane, stop canaries"),
    "rollback": (steps.rollback, "stop canary producers, drain, close the lane, stop canary consumers"),
    "verify": (steps.verify, "check the promised state, release the lock"),
}


def register(sub) -> None:
    p = sub.add_parser("client-rollout", help="gated rollout of a producer/consumer service version in a canary lane",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    csub = p.add_subparsers(dest="client_rollout_command", required=True)

    def common(q) -> None:
        q.add_argument("--spec", required=True, help="the client rollout spec (YAML or JSON)")
        q.add_argument("--run-dir", help="state, audit log and report of this run (default rollouts/<run_id>, "
                                         "or $KAFKA_CANARY_RUNS/<run_id>)")
        q.add_argument("--json", action="store_true", help="print the result as JSON")

    run = csub.add_parser("run", help="all steps (a second run resumes where the first stopped)")
    common(run)
    run.add_argument("--approve", action="store_true", help="promote on an INCONCLUSIVE verdict")
    run.add_argument("--on-inconclusive", choices=("rollback", "stop"), default="rollback",
                     help="INCONCLUSIVE without --approve: roll back (default) or stop for a person (exit 3)")
    run.set_defaults(func=cmd_run)
    for name, (_, text) in STEPS.items():
        q = csub.add_parser(name, help=text)
        common(q)
        if name == "promote":
            q.add_argument("--approve", action="store_true", help="promote on an INCONCLUSIVE verdict")
        q.set_defaults(func=cmd_step, step=name)
    base = csub.add_parser("baseline", help="start the service's baseline fleet on change.from (idempotent)")
    common(base)
    base.set_defaults(func=cmd_baseline)
    stop = csub.add_parser("stop-fleet", help="stop every instance of the service's fleet")
    common(stop)
    stop.set_defaults(func=cmd_stop_fleet)


def _logging() -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s", "%H:%M:%S"))
    logger = logging.getLogger("canary.rollout")
    if not logger.handlers:
        logger.addHandler(handler)
    logger.setLevel(logging.INFO)


def _rollout(args) -> ClientRollout:
    return ClientRollout(load_client_spec(args.spec, environ=dict(os.environ)), args.run_dir)


def _print(args, result: dict) -> None:
    print(json.dumps(result, indent=2, default=str) if args.json else
          "\n".join(f"{k}: {v}" for k, v in result.items()))


def cmd_run(args) -> int:
    _logging()
    result = run_client_rollout(_rollout(args), approve=args.approve, on_inconclusive=args.on_inconclusive)
    _print(args, result)
    return EXIT[result["outcome"]]


def cmd_step(args) -> int:
    _logging()
    rollout = _rollout(args)
    fn = STEPS[args.step][0]
    try:
        result = fn(rollout, approve=args.approve) if args.step == "promote" else fn(rollout)
    finally:
        write_report(rollout.state, rollout.audit)
    _print(args, result)
    return EXIT.get(result["verdict"], 2) if args.step == "judge" else 0


def cmd_baseline(args) -> int:
    rollout = _rollout(args)
    rollout.step = "baseline"
    started = steps._converge(rollout, steps.fleet(rollout.spec, rollout.spec.from_version))
    _print(args, {"started": started, "fleet": [s.to_dict() for s in rollout.services.instances()]})
    return 0


def cmd_stop_fleet(args) -> int:
    rollout = _rollout(args)
    _print(args, {"stopped": rollout.services.stop_all()})
    return 0
