"""`kafka-canary client-rollout …`: the gated rollout of a producer/consumer service's new version (`run`), one step
at a time (each idempotent), and the service fleet itself (`baseline`, `stop-fleet`).

Exit codes as for `kafka-canary rollout`: `run` 0 promoted and verified, 1 rolled back and verified, 3 a person must
decide (INCONCLUSIVE with --on-inconclusive stop), 2 error. Other commands 0 done, 2 error.
"""

from __future__ import annotations

import argparse
import os

from canary.rollout import client_steps as steps
from canary.rollout.cli import Commands, add_commands, print_result
from canary.rollout.client_spec import load_client_spec
from canary.rollout.client_steps import EXIT, ClientRollout, run_client_rollout

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


def _rollout(args) -> ClientRollout:
    return ClientRollout(load_client_spec(args.spec, environ=dict(os.environ)), args.run_dir)


CLIENT = Commands(STEPS, _rollout, run_client_rollout, EXIT, ("judge",), "the client rollout spec (YAML or JSON)")


def register(sub) -> None:
    p = sub.add_parser("client-rollout", help="gated rollout of a producer/consumer service version in a canary lane",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    csub = p.add_subparsers(dest="client_rollout_command", required=True)
    common = add_commands(csub, CLIENT)
    base = csub.add_parser("baseline", help="start the service's baseline fleet on change.from (idempotent)")
    common(base)
    base.set_defaults(func=cmd_baseline)
    stop = csub.add_parser("stop-fleet", help="stop every instance of the service's fleet")
    common(stop)
    stop.set_defaults(func=cmd_stop_fleet)


def cmd_baseline(args) -> int:
    rollout = _rollout(args)
    rollout.step = "baseline"
    started = steps._converge(rollout, steps.fleet(rollout.spec, rollout.spec.from_version))
    print_result(args, {"started": started, "fleet": [s.to_dict() for s in rollout.services.instances()]})
    return 0


def cmd_stop_fleet(args) -> int:
    rollout = _rollout(args)
    print_result(args, {"stopped": rollout.services.stop_all()})
    return 0
