"""`kafka-canary rollout …`: the whole gated broker rollout (`run`) or one step at a time, each idempotent.

The cluster's client settings are the spec's `cluster.client`; `KAFKA_CANARY_CLIENT_<KEY>` environment variables add
or override them (KAFKA_CANARY_CLIENT_SASL_PASSWORD for sasl.password), so no password need be in the spec file.

Exit codes (canary.outcome): `run` 0 promoted and verified, 1 rolled back and verified, 3 a person must decide
(INCONCLUSIVE with --on-inconclusive stop), 4 the run stopped unfinished (a step failed or was refused: the same
command goes on), 2 an error before the run existed. `gate` 0/1/3 by verdict. Other steps 0 done, 4 failed.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import cast

from canary.errors import CanaryError
from canary.kafka.wait import wait_until
from canary.outcome import Outcome
from canary.rollout import guard
from canary.rollout.broker import BROKER, Rollout, promote
from canary.rollout.core import pause
from canary.rollout.core.cli import add_commands, cmd_step, open_run, print_result, run_status
from canary.rollout.core.lock import ClusterLock


def register(sub) -> None:
    p = sub.add_parser("rollout", help="gated broker rollout: canary brokers, probe, gate, promote or rollback",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    rsub = p.add_subparsers(dest="rollout_command", required=True)
    common = add_commands(rsub, BROKER)
    status = rsub.add_parser("status", help="the run's state: steps, verdict, lock holder")
    common(status)
    status.set_defaults(func=cmd_status, kind=BROKER)
    plan = rsub.add_parser("plan", help="the promotion as it would go now: the batches from the cluster's "
                                       "placement and racks, their notes, the controllers (changes nothing)")
    common(plan)
    plan.set_defaults(func=cmd_plan, kind=BROKER)
    promote_step = rsub.choices["promote"]
    promote_step.add_argument("--dry-run", action="store_true", help="print the promotion's plan as `plan` does and "
                                                                     "change nothing")
    promote_step.set_defaults(func=cmd_promote)
    for word, text in (("pause", "stop the run's promotion before its next wave: it waits, saying so, until resume "
                                 "(the wave under way finishes, and its look)"),
                       ("resume", "let a paused promotion go on with its next wave")):
        q = rsub.add_parser(word, help=text)
        common(q)
        if word == "pause":
            q.add_argument("--reason", default="", help="why, shown to whoever looks at the run")
        q.set_defaults(func=cmd_pause, kind=BROKER)
    describe = rsub.add_parser("describe", help="the brokers and controllers as the spec's deployer sees them "
                                                "(changes nothing: try a cluster section before a rollout)")
    describe.add_argument("--spec", required=True)
    describe.add_argument("--json", action="store_true")
    describe.set_defaults(func=cmd_describe)
    stop = rsub.add_parser("stop-broker", help="stop one broker gracefully through the spec's deployer, if the "
                                             "safe-roll guard allows it and no rollout holds the cluster")
    stop.add_argument("broker", type=int)
    stop.add_argument("--spec", required=True)
    stop.add_argument("--force", action="store_true", help="stop even so (partitions may go below min ISR)")
    stop.set_defaults(func=cmd_stop_broker)
    start = rsub.add_parser("start-broker", help="start a stopped broker again as it was, through the spec's "
                                               "deployer")
    start.add_argument("broker", type=int)
    start.add_argument("--spec", required=True)
    start.set_defaults(func=cmd_start_broker)
    unlock = rsub.add_parser("unlock", help="break the cluster's rollout lock (only when its rollout is dead)")
    unlock.add_argument("--spec", required=True)
    unlock.add_argument("--force", action="store_true", help="required: you checked the holder is dead")
    unlock.add_argument("--json", action="store_true")
    unlock.set_defaults(func=cmd_unlock)


def cmd_status(args) -> int:
    rollout = open_run(args)
    print_result(args, run_status(rollout) | {"canary_brokers": rollout.state.record.canary_brokers})
    return 0


def cmd_plan(args) -> int:
    rollout = open_run(args)
    result = promote.plan_now(cast(Rollout, rollout))
    if args.json:
        print_result(args, result)
    else:
        print("\n".join(result["lines"]))
    return 0


def cmd_promote(args) -> int:
    """`promote`, or with --dry-run the plan it would follow (nothing restarts)."""
    return cmd_plan(args) if args.dry_run else cmd_step(args)


def cmd_pause(args) -> int:
    """Pauses or resumes the run's promotion (its pause is a key of the run's storage: canary.rollout.core.pause)."""
    rollout = open_run(args)
    result: dict[str, object]
    by = os.environ.get("USER") or "the command line"
    if args.rollout_command == "pause":
        entry = pause.pause(rollout.store, rollout.audit, by, args.reason)
        result = {"paused": entry, "line": f"{pause.describe(entry)}: the promotion stops before its next wave; "
                                           f"`kafka-canary rollout resume` lets it go on"}
    else:
        ended = pause.resume(rollout.store, rollout.audit, by)
        result = {"resumed": ended, "line": "the promotion goes on with its next wave" if ended else
                  "the run was not paused"}
    if args.json:
        print_result(args, result)
    else:
        print(result["line"])
    return 0


def cmd_describe(args) -> int:
    spec = BROKER.load_spec(args.spec, dict(os.environ))
    deployer = spec.cluster.open_deployer(spec.client)
    brokers, controllers = deployer.brokers(), deployer.controllers()
    result = {"deployer": spec.cluster.deployer, "bootstrap_servers": deployer.bootstrap_servers,
              "capabilities": sorted(deployer.capabilities),
              "brokers": [b.to_dict() | {"running": b.running} for b in brokers],
              "controllers": [c.to_dict() | {"running": c.running} for c in controllers]}
    if args.json:
        print_result(args, result)
        return 0
    print(f"deployer {spec.cluster.deployer}, bootstrap servers {deployer.bootstrap_servers}, can also: "
          f"{', '.join(result['capabilities']) or 'nothing more'}")
    for b in brokers:
        print(f"broker {b.broker_id:>5}  {b.version:<8} {'running' if b.running else 'DOWN':<8} rack {b.rack or '-'}  "
              f"config {', '.join(f'{k}={v}' for k, v in sorted(b.config.items())) or '-'}")
    for c in controllers:
        print(f"controller {c.node_id:>5}  {c.version:<8} {'running' if c.running else 'DOWN'}")
    return 0


def _stop_start_deployer(args):
    """The spec, its deployer and the broker, checked: the deployer can stop and start, the broker is one of its."""
    spec = BROKER.load_spec(args.spec, dict(os.environ))
    deployer = spec.cluster.open_deployer(spec.client)
    if "stop_start" not in deployer.capabilities:
        raise CanaryError(f"the {spec.cluster.deployer} deployer cannot stop or start a broker"
                          + (": add stop and start to cluster.command" if spec.cluster.deployer == "command" else ""))
    brokers = {b.broker_id: b for b in deployer.brokers()}
    if args.broker not in brokers:
        raise CanaryError(f"broker {args.broker} is not one of the deployer's brokers {sorted(brokers)}")
    return spec, deployer, brokers


def cmd_stop_broker(args) -> int:
    spec, deployer, brokers = _stop_start_deployer(args)
    if not brokers[args.broker].running:
        print(f"broker {args.broker} is already stopped")
        return 0
    holder = ClusterLock(deployer.bootstrap_servers, spec.client).holder()
    down = {b for b, info in brokers.items() if not info.running}
    decision = guard.decide(args.broker, guard.observe(deployer.bootstrap_servers, spec.client), down)
    refusals = decision.reasons
    if holder is not None:
        refusals = [f"a rollout ({holder.get('run_id', 'unknown run')}) holds the cluster", *refusals]
    if refusals and not args.force:
        raise CanaryError(f"broker {args.broker} was not stopped: {'; '.join(refusals[:3])}; wait, or pass --force")
    deployer.stop_broker(args.broker)
    print(f"broker {args.broker} stopped (controlled shutdown); `kafka-canary rollout start-broker {args.broker} "
          f"--spec {args.spec}` starts it again")
    return 0


def cmd_start_broker(args) -> int:
    spec, deployer, brokers = _stop_start_deployer(args)
    if brokers[args.broker].running:
        print(f"broker {args.broker} is already running")
        return 0
    deployer.start_broker(args.broker)
    wait_until(f"broker {args.broker} back in the ISR", spec.timeouts.warm_up,
               lambda: guard.learner_missing(deployer.bootstrap_servers, spec.client, [args.broker]), None)
    print(f"broker {args.broker} started, registered and back in the ISR of every partition it hosts")
    return 0


def cmd_unlock(args) -> int:
    spec = BROKER.load_spec(args.spec, dict(os.environ))
    lock = ClusterLock(spec.cluster.open_deployer(spec.client).bootstrap_servers, spec.client)
    holder = lock.holder()
    if not args.force:
        print(f"the lock is held by {holder}; pass --force to break it (only when that rollout is dead)"
              if holder is not None else "the cluster is not locked", file=sys.stderr)
        return Outcome.ERROR.exit_code if holder is not None else 0
    removed = lock.force_release()
    print_result(args, {"removed": removed})
    return 0
