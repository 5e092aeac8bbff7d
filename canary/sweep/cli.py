"""`kafka-canary sweep …`: one sweep from the command line (exit 0 healthy, 1 degraded, 3 inconclusive, 2 error:
SWEEP_OUTCOMES and canary.outcome)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from canary.probe import cli as probe_cli
from canary.rollout.core.index import RunsIndex
from canary.rollout.core.record import Origin
from canary.rollout.core.run import runs_url
from canary.storage import open_store
from canary.sweep.alerts import WEBHOOK_ENV, Alert, send_alert
from canary.sweep.config import DEFAULT_HISTORY, DEGRADED, HISTORY_ENV, SWEEP_OUTCOMES, SweepConfig, history_root
from canary.sweep.result import SweepBrief
from canary.sweep.run import run_sweep
from canary.sweep.summary import ms_text, percent_text


def register(sub) -> None:
    from canary import sweep

    parser = sub.add_parser(
        "sweep", help="health sweep: probe a cluster briefly, compare with its history, keep a trend; exit 0 "
                      "healthy, 1 degraded, 3 inconclusive, 2 error", description=sweep.__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap-servers", help="host:port[,host:port] (or bootstrap.servers in --config)")
    parser.add_argument("--config", help="properties or JSON file of librdkafka settings (SASL, TLS, …); env "
                                         "KAFKA_CANARY_CLIENT_<KEY> adds client settings")
    parser.add_argument("--cluster-name", help="the name the history is kept under (default: the bootstrap servers)")
    parser.add_argument("--duration", default="30s", help="probe traffic, e.g. 30s (default %(default)s)")
    parser.add_argument("--rate", type=probe_cli.rate, default=20.0,
                        help="messages per second per partition (default %(default)g)")
    parser.add_argument("--reference", type=int, default=6, help="healthy sweeps pooled as the reference (default 6)")
    parser.add_argument("--judge-config", metavar="judge.yaml",
                        help="judge thresholds merged over the sweep's defaults")
    parser.add_argument("--history", help=f"history root: a directory or s3://bucket/prefix (default ${HISTORY_ENV} or "
                        f"{DEFAULT_HISTORY})")
    parser.add_argument("--out", type=Path, help="result.json, report.html, trend (default: under the history)")
    parser.add_argument("--keep-observations", action="store_true", help="keep observations.jsonl in --out")
    parser.add_argument("--alert", action="store_true", help=f"when DEGRADED: append to <history>/alerts.jsonl and "
                                                             f"POST to ${WEBHOOK_ENV} if set")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.set_defaults(func=cmd_sweep)


def cmd_sweep(args: argparse.Namespace) -> int:
    from canary.probe import config as probe_config

    client = probe_config.load(args.bootstrap_servers, args.config)  # file, env; validated as the probe's
    config = SweepConfig(bootstrap_servers=client.bootstrap_servers, cluster_name=args.cluster_name,
                         client=client.client, duration=args.duration, rate=args.rate, judge=args.judge_config,
                         reference_sweeps=args.reference, history=args.history, out=args.out,
                         keep_observations=args.keep_observations)
    print(f"sweeping {config.cluster} ({config.bootstrap_servers}) for {config.duration:g}s at {config.rate:g} "
          f"msg/s per partition ...", file=sys.stderr, flush=True)
    # Listed in the runs index beside the rollouts when its report stays in the history, where the pages find it.
    index = RunsIndex(open_store(runs_url())) if config.out is None else None
    result = run_sweep(config, index=index, origin=Origin(trigger="cli", by=os.environ.get("USER") or None))
    if args.alert and result.verdict == DEGRADED:
        sent = send_alert(Alert(config.cluster, DEGRADED, result.reason, result.sweep_id, result.report),
                          config.history or history_root(), os.environ.get(WEBHOOK_ENV))
        result = result.model_copy(update={"alert": sent})
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
    else:
        _print_result(result)
    return SWEEP_OUTCOMES[result.verdict].exit_code


def _print_result(result: SweepBrief) -> None:
    summary = result.summary
    print(f"{result.verdict}: {result.reason}")
    print(f"  {summary['observations']} observations, e2e p99 {ms_text(summary['e2e_p99_ms'])}, produce p99 "
          f"{ms_text(summary['produce_p99_ms'])}, errors {percent_text(summary['error_rate'])}, lost "
          f"{percent_text(summary['loss_rate'])}, availability {percent_text(summary['availability'])}; "
          f"{result.seconds:g}s")
    print(f"  report {result.report}\n  history {result.history_file}\n  trend {result.trend_file}")
