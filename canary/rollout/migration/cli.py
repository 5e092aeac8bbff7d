"""`kafka-canary migrate-protocol`: the migration canary kind from the command line. Its steps run only together
(the instances are children of this process), so there is one command, no per-step ones; the spec comes from flags.
Exit codes (canary.outcome) by the verdict: 0 PROMOTE, 1 ROLLBACK, 3 INCONCLUSIVE, whichever action followed it (a
person's `--action` may overrule it); 2 refused or an error (from canary.cli): a migration run is never left
unfinished, since whatever happens every instance is closed and the lock released, and running it again starts over."""

from __future__ import annotations

import argparse
import json
import shlex
from pathlib import Path

from canary.judge import Brief
from canary.rollout.migration.kind import MIGRATION, run_migration
from canary.rollout.migration.spec import MigrationSpec, MigrationSpecError

DESCRIPTION = ("The KIP-848 migration canary: a consumer service moves from the classic group protocol to "
               "`group.protocol=consumer`, canary instances first (docs/migration-canary.md).")


def register(sub) -> None:
    parser = sub.add_parser(MIGRATION.command, description=DESCRIPTION,
                            help="KIP-848 migration canary: canary instances of a consumer service on "
                                 "group.protocol=consumer first, compared, then promoted or rolled back")
    parser.add_argument("--bootstrap-servers", required=True)
    parser.add_argument("--topic", required=True, help="the service's topic (must exist)")
    parser.add_argument("--group", required=True, help="the service's group id (must have no other member)")
    parser.add_argument("--out", required=True, help="output directory, or run storage URL (s3://bucket/prefix/run): "
                        "result.json, verdict.json, events")
    parser.add_argument("--command", help="the team's consumer, as one line split like a shell's, {placeholders} "
                                          "from the instance contract (docs/migration-canary.md); default: the "
                                          "sample subscribed consumer")
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                        help="added to every instance's environment (repeatable)")
    parser.add_argument("--cwd", default="", help="the instances' working directory")
    parser.add_argument("--version", default="current", help="the version every instance runs ({version})")
    parser.add_argument("--baseline", type=int, default=3, help="baseline instances on classic (default 3)")
    parser.add_argument("--canary", type=int, default=1, help="canary instances on consumer (default 1)")
    parser.add_argument("--rate", type=float, default=0.0, help="records/s of synthetic traffic the canary writes "
                                                                "into the topic (default 0: none; the service's "
                                                                "own traffic is judged)")
    parser.add_argument("--window", type=float, default=60.0, help="compared window in seconds (default 60)")
    parser.add_argument("--disturb-at", type=float, default=20.0, help="seconds into the window when a baseline "
                                                                       "instance restarts (default 20)")
    parser.add_argument("--classic-assignor", help="partition.assignment.strategy of classic instances (default "
                                                   "librdkafka's range,roundrobin)")
    parser.add_argument("--remote-assignor", choices=("uniform", "range"),
                        help="server-side assignor (default: broker's)")
    parser.add_argument("--client-config", type=Path, help="JSON file of librdkafka connection/security settings")
    parser.add_argument("--action", choices=("auto", "promote", "rollback"), default="auto",
                        help="after the verdict: auto (promote on PROMOTE, else roll back; default), or a person's "
                             "choice")
    parser.add_argument("--judge-config", help="YAML merged over the migration's judge settings")
    parser.add_argument("--json", action="store_true", help="print the whole result as JSON")
    parser.set_defaults(func=cmd_migrate_protocol, kind=MIGRATION)


def spec_from_args(args: argparse.Namespace) -> MigrationSpec:
    """The kind's spec from the command's flags (--client-config: a JSON file of librdkafka settings)."""
    client = json.loads(args.client_config.read_text()) if args.client_config else {}
    env = dict(pair.partition("=")[::2] for pair in args.env)
    bad = [pair for pair in args.env if "=" not in pair]
    if bad:
        raise MigrationSpecError([f"--env {bad[0]!r}: give NAME=VALUE"])
    return MigrationSpec(bootstrap_servers=args.bootstrap_servers, topic=args.topic, group=args.group,
                         command=shlex.split(args.command) if args.command else [], env=env, cwd=args.cwd,
                         version=args.version, out_dir=args.out, baseline=args.baseline, canary=args.canary,
                         rate=args.rate, window_s=args.window, disturb_at_s=args.disturb_at,
                         classic_assignor=args.classic_assignor,
                         remote_assignor=args.remote_assignor, client=client, action=args.action,
                         judge_config=args.judge_config)


def cmd_migrate_protocol(args: argparse.Namespace) -> int:
    result = run_migration(spec_from_args(args))
    print(json.dumps(result, indent=2) if args.json else summary(result))
    return Brief.of(result).outcome.exit_code


def summary(result: dict) -> str:
    """A few lines a person reads: verdict, per-lane disruption, lag, the action and what was consumed."""
    lines = [f"verdict {Brief.of(result).line()}"]
    for lane, disruption in result["disruption"]["lanes"].items():
        per = disruption["per_instance"]
        lines.append(f"  {lane:<8} ({disruption['slots']} instance(s)) per instance: {per['revoked']:g} revoked, "
                     f"{per['needless']:g} needlessly, {per['pause_s']:g}s without partitions, "
                     f"{per['callbacks']:g} callbacks")
    for name, metric in result["judge"]["metrics"].items():
        lines.append(f"  {name}: canary {metric['canary']} vs baseline {metric['baseline']} ({metric['decision']})")
    action, records = result["action"], result["verify"]["records"]
    lines.append(f"{action['name']}: switched {action['switched'] or 'nothing'} to {action['protocol']}; verified "
                 f"{'OK' if result['verify']['ok'] else 'NOT OK'}; the group committed "
                 f"{'everything' if not records['short'] else 'not everything'} the topic held at verify "
                 f"({sum(records['ends'].values())} records)")
    return "\n".join(lines)
