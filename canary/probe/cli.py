"""`kafka-canary probe`: run the probe, print a per-lane summary. Exit 0 when messages went
through, 1 when the cluster answered but no message was acknowledged, 2 when it could not be
reached at all (or the settings are unusable)."""

from __future__ import annotations

import argparse
import json
import math
import signal
import sys
from pathlib import Path

from canary.fields import parse_duration
from canary.kafka.secrets import redacted
from canary.probe import config as probe_config
from canary.probe.runner import Probe
from canary.probe.view import ProbeSummary


def register(sub) -> None:
    p = sub.add_parser("probe", help="synthetic produce/consume traffic per partition, broker and lane",
                       description=__doc__)
    p.add_argument("--bootstrap-servers", help="host:port[,host:port] (or bootstrap.servers in --config)")
    p.add_argument("--duration", help="how long to run, e.g. 60s, 5m (default: until Ctrl-C)")
    p.add_argument("--rate", type=rate, help="messages per second per partition (default 10)")
    p.add_argument("--message-size", type=int, help="bytes per message value (default 200)")
    p.add_argument("--http-port", type=port, help="serve /metrics /liveness /readiness /status on this port (0: "
                                                  "any free port)")
    p.add_argument("--config", help="properties or JSON file: librdkafka settings (SASL, TLS, …) and probe.* "
                                    "options; env KAFKA_CANARY_CLIENT_<KEY> adds client settings")
    p.add_argument("--topic", help="canary topic (default __kafka_canary)")
    p.add_argument("--run-id", help="run id written into every observation (default: random)")
    p.add_argument("--producer-id", help="this probe's producer id (default: host-pid)")
    p.add_argument("--observations-file", type=file_to_append,
                   help="also append observations to this JSONL file")
    p.add_argument("--no-observations-topic", action="store_true", help="do not write observations to the cluster")
    p.add_argument("--no-reconcile", action="store_true", help="use the topic as it is (no admin changes)")
    p.add_argument("--rtt-sla", help="acknowledged but not received within this = lost (default 30s)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.set_defaults(func=cmd_probe)


# argparse types: a bad value is a usage error (exit 2, one line) before anything is started.

def rate(text: str) -> float:
    """Messages per second per partition: a finite number above 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid float value: {text!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"rate must be > 0 and finite (messages/s per partition), got {text!r}")
    return value


def port(text: str) -> int:
    """A TCP port, 0 (any free port) to 65535."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid port: {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{value} is not a port: give 0 (any free port) to 65535")
    return value


def file_to_append(text: str) -> str:
    """A file path that is not a directory and whose parent directory exists."""
    path = Path(text)
    shown = text if len(text) <= 80 else f"{text[:77]}..."
    try:
        if not text or path.is_dir():
            raise argparse.ArgumentTypeError(f"{shown!r} is a directory: give a file to append observations to")
        if not path.parent.is_dir():
            raise argparse.ArgumentTypeError(f"the directory of {shown!r} does not exist")
    except OSError as exc:  # a name the system refuses (too long, …): the check itself cannot be made
        raise argparse.ArgumentTypeError(f"{shown!r} cannot be a file here: {exc.strerror}") from None
    return text


def cmd_probe(args: argparse.Namespace) -> int:
    cfg = probe_config.load(
        args.bootstrap_servers, args.config,
        duration=parse_duration(args.duration), rate=args.rate, message_size=args.message_size,
        http_port=args.http_port, topic=args.topic, run_id=args.run_id, producer_id=args.producer_id,
        observations_file=args.observations_file, observations_topic="" if args.no_observations_topic else None,
        reconcile=False if args.no_reconcile else None, rtt_sla=parse_duration(args.rtt_sla))
    probe = Probe(cfg)
    probe.check_local()
    signal.signal(signal.SIGTERM, lambda *_: probe._stop_producing.set())
    print(f"probe {cfg.producer_id} run {cfg.run_id} on {cfg.bootstrap_servers}, topic {cfg.topic}, "
          f"{cfg.rate:g} msg/s per partition"
          + (f", client settings {json.dumps(redacted(cfg.client))}" if cfg.client else ""),
          file=sys.stderr)
    try:
        summary = probe.run()
    except KeyboardInterrupt:
        summary = probe.stop()
    print(json.dumps(summary.to_dict(), indent=2) if args.json else format_summary(summary))
    return 0 if summary.acked else 1


def format_summary(summary: ProbeSummary) -> str:
    lines = [f"run {summary.run_id}, producer {summary.producer_id}, topic {summary.topic}, {summary.seconds} s"]
    header = (f"{'lane':<9}{'sent':>8}{'acked':>8}{'errors':>8}{'lost':>6}{'dup':>5}{'ooo':>5}{'avail':>8}"
              f"{'produce p50/p99 ms':>20}{'e2e p50/p99 ms':>18}")
    lines.append(header)
    for lane, t in summary.lanes.items():
        p, e = t["produce_latency"], t["e2e_latency"]
        avail = "-" if t["availability"] is None else f"{t['availability'] * 100:.2f}%"
        lines.append(f"{lane:<9}{t['sent']:>8}{t['acked']:>8}{t['produce_errors']:>8}{t['lost']:>6}"
                     f"{t['duplicated']:>5}{t['out_of_order']:>5}{avail:>8}"
                     f"{_pair(p):>20}{_pair(e):>18}")
    if not summary.lanes:
        lines.append("(no message was sent)")
    extra = {k: v for k, v in summary.unresolved.items() if v}
    if extra:
        lines.append(f"still in flight at the end (not counted lost): {extra}")
    if summary.foreign_records or summary.malformed_records:
        lines.append(f"other probes' records: {summary.foreign_records}, malformed records: "
                     f"{summary.malformed_records}")
    obs = summary.observations
    lines.append(f"observations written: {obs['written']}, failed: {obs['failed'] + obs['dropped']}")
    return "\n".join(lines)


def _pair(latency: dict) -> str:
    if not latency["count"]:
        return "-"
    return f"{latency['p50_ms']:.1f}/{latency['p99_ms']:.1f}"
