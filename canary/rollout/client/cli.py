"""`kafka-canary client-rollout …`: the gated rollout of a producer/consumer service's new version (`run`), one step
at a time (each idempotent), the run and its fleet as they are (`status`), and the service fleet itself (`baseline`,
`stop-fleet`).

Exit codes as for `kafka-canary rollout` (canary.outcome): `run` 0 promoted and verified, 1 rolled back and verified,
3 a person must decide (INCONCLUSIVE with --on-inconclusive stop), 4 the run stopped unfinished, 2 an error before
the run existed. Other commands 0 done, 4 a step failed, 2 error.
"""

from __future__ import annotations

import argparse
from typing import cast

from canary.rollout.client import CLIENT, ClientRollout, fleet
from canary.rollout.client.fleet import converge
from canary.rollout.client.lane import canary_partitions_now
from canary.rollout.core.cli import add_commands, open_run, print_result, run_status


def register(sub) -> None:
    p = sub.add_parser("client-rollout", help="gated rollout of a producer/consumer service version in a canary lane",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    csub = p.add_subparsers(dest="client_rollout_command", required=True)
    common = add_commands(csub, CLIENT, "the client rollout spec (YAML or JSON)")
    base = csub.add_parser("baseline", help="start the service's baseline fleet on change.from (idempotent)")
    common(base)
    base.set_defaults(func=cmd_baseline, kind=CLIENT)
    status = csub.add_parser("status", help="the run's state (steps, verdict, lock holder), the canary partitions "
                                           "open now and every instance of the fleet (lane, version, running)")
    common(status)
    status.set_defaults(func=cmd_status, kind=CLIENT)
    stop = csub.add_parser("stop-fleet", help="stop every instance of the service's fleet")
    common(stop)
    stop.set_defaults(func=cmd_stop_fleet, kind=CLIENT)


def _open(args) -> ClientRollout:
    # These commands' parsers set kind=CLIENT, whose runs are ClientRollouts.
    return cast(ClientRollout, open_run(args))


def cmd_baseline(args) -> int:
    rollout = _open(args)
    rollout.step = "baseline"
    started = converge(rollout, fleet(rollout.spec, rollout.spec.change.from_))
    print_result(args, {"started": started, "fleet": [s.to_dict() for s in rollout.services.instances()]})
    return 0


def cmd_status(args) -> int:
    rollout = _open(args)
    print_result(args, run_status(rollout) | {"canary_partitions": canary_partitions_now(rollout),
                                              "fleet": [s.to_dict() for s in rollout.services.instances()]})
    return 0


def cmd_stop_fleet(args) -> int:
    rollout = _open(args)
    print_result(args, {"stopped": rollout.services.stop_all()})
    return 0
