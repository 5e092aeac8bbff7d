"""How long promotion takes one broker at a time and in batches, drained or not, on the same fleet (issue 37).

    .venv/bin/python bench/promote_batches.py [--cases 1:drain,2:drain,2:nodrain] [--start-delay 20] [--traffic 1000]
                                              [--keep DIR]

The fleet: six embedded brokers of Kafka 3.9.2 over three racks (a, a, b, b, c, c), so every topic of replication 3
has one replica in each rack and the two brokers of a rack may be away together. For each `--batches` value, one
rollout of a harmless change (`num.io.threads`: 8, Kafka's default, for the first, 9 for the next, …: the restarts are
the whole change) on that fleet, whose restarted brokers stay down `--start-delay` seconds before they start (a
production broker's log recovery, rehearsed), while Kafka's ProducerPerformance (acks=all, 1 kB records) writes
`--traffic` records/s into an 8-partition topic and ConsumerPerformance reads it:
preflight, deploy-canary (broker 2) and warm-up run as steps; the verdict is then recorded as PROMOTE by the bench
(the gate is not what is measured here), and promote and verify run as steps with `promote.max_batch` and
`promote.drain` as the case says. The probe runs through every roll, as in a real rollout. Printed per run: the
plan's batches, the promote step's seconds (its brokers' rolls), the acknowledged
messages the probe lost during the rolls, the seconds spent rolling batches (from a batch's drain to its return to
every ISR with its leadership back) and in the looks between waves, the probe's produce and e2e p99 during the
rolls against the same probe's between them, and the fewest in-sync replicas above min.insync.replicas the roll's
own ISR looks saw while a batch was away. `--analyse DIR` prints the same of the runs a `--keep DIR` kept.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from canary.cluster import distribution  # noqa: E402
from canary.cluster.local import LocalCluster  # noqa: E402
from canary.cluster.traffic import TrafficSpec, UserTraffic  # noqa: E402
from canary.judge import PROMOTE  # noqa: E402
from canary.judge.brief import Brief  # noqa: E402
from canary.observations import Observation, read_file_counted  # noqa: E402
from canary.rollout.broker import BROKER, Rollout  # noqa: E402
from canary.rollout.broker.spec import load_spec  # noqa: E402
from canary.rollout.core.verdict import record_verdict  # noqa: E402

RACKS = ["a", "a", "b", "b", "c", "c"]


def p99s(records: list[Observation]) -> dict[str, float | None]:
    """The probe's produce (send to ack) and e2e (send to receive) p99 in ms over `records`."""
    produce = [r.ack_ts - r.send_ts for r in records if r.ack_ts is not None]
    e2e = [r.receive_ts - r.send_ts for r in records if r.receive_ts is not None]
    return {"produce": round(float(np.percentile(produce, 99)), 1) if produce else None,
            "e2e": round(float(np.percentile(e2e, 99)), 1) if e2e else None, "messages": len(records)}


def roll_periods(audit: list[dict]) -> list[tuple[int, int]]:
    """When the promotion was rolling a batch: from its drain (or its first restart) until it was back in every ISR
    with its leadership given back."""
    periods, start = [], None
    for e in audit:
        if e["step"] != "promote":
            continue
        if e["action"] in ("drain", "restart broker") and start is None:
            start = e["ts_ms"]
        elif e["action"] == "batch back in every ISR" and start is not None:
            periods.append((start, e["ts_ms"]))
            start = None
    return periods


def figures(run_dir: Path) -> dict:
    """From a promotion's own files: the seconds spent rolling batches and in looks, and the probe's p99 during the
    rolls against the same probe's between them (looks and pauses between batches: the same fleet, quiet)."""
    audit = [json.loads(line) for line in (run_dir / "audit.jsonl").read_text().splitlines()]
    periods = roll_periods(audit)
    looks = [e["ts_ms"] for e in audit if e["action"] in ("wave look started", "wave look")]
    records = [r for r in read_file_counted(run_dir / "observations-promote.jsonl")[0] if isinstance(r, Observation)]
    rolling = [r for r in records if any(a <= r.send_ts <= b for a, b in periods)]
    quiet = [r for r in records if not any(a <= r.send_ts <= b for a, b in periods)]
    return {"rolls_s": round(sum(b - a for a, b in periods) / 1000, 1),
            "looks_s": round(sum(b - a for a, b in zip(looks[::2], looks[1::2], strict=False)) / 1000, 1),
            "quiet_p99_ms": p99s(quiet), "rolls_p99_ms": p99s(rolling)}


def promote_once(cluster: LocalCluster, root: Path, n: int, max_batch: int, drain: bool) -> dict:
    # a change each run (8 I/O threads, Kafka's default, then 9, ...): a broker already as desired is not restarted
    change = {"num.io.threads": str(8 + n)}
    name = f"{n}-batch-{max_batch}-{'drain' if drain else 'nodrain'}"
    spec = load_spec({"cluster": {"dir": str(cluster.directory)}, "change": {"config": change},
                      "canary": {"brokers": [2], "control": "none"}, "judge": {"engine": "inline"},
                      "probe": {"preflight": "10s", "calibration": "10s"}, "capacity": "not_required",
                      "timeouts": {"warm_up": "10m", "guard": "10m"},
                      "promote": {"max_batch": max_batch, "drain": drain}, "run_id": name})
    rollout = Rollout(spec, root / f"run-{name}")
    for step in ("preflight", "deploy-canary", "warm-up"):
        BROKER.step(step)(rollout)
    rollout.step = "judge"
    record_verdict(rollout, Brief(verdict=PROMOTE, reason="recorded by bench/promote_batches.py"))
    BROKER.step("promote")(rollout)
    BROKER.step("verify")(rollout)
    step = rollout.state.record.step("promote")
    result = (step.result if step else None) or {}
    headroom = [r["isr_headroom_min"] for r in result.get("rolled", []) if "isr_headroom_min" in r]
    guard = [f"{e['action']}: {e.get('brokers') or e.get('broker')} {e.get('waited_s', '')}".strip()
             for e in rollout.audit.entries() if e["step"] == "promote" and e["action"].startswith("guard")]
    return {"max_batch": max_batch, "drain": drain, "batches": [b["brokers"] for b in result["plan"]["batches"]],
            "promote_s": step.took_s if step else None, "lost": (result.get("probe") or {}).get("lost"),
            **figures(rollout.run_dir), "isr_headroom_min": min(headroom, default=None), "guard": guard,
            "status": str(rollout.state.status)}


def promoted(run_dir: Path) -> bool:
    """Whether the kept run's promote step finished."""
    steps = json.loads((run_dir / "run.json").read_text())["steps"] if (run_dir / "run.json").is_file() else {}
    return (steps.get("promote") or {}).get("status") == "done"


def analysed(run_dir: Path) -> dict:
    """The row of a kept run (`--analyse`), from its run.json and files."""
    record = json.loads((run_dir / "run.json").read_text())
    result = record["steps"]["promote"]["result"]
    promote = record["spec"].get("promote") or {}
    step = record["steps"]["promote"]
    headroom = [r["isr_headroom_min"] for r in result.get("rolled", []) if "isr_headroom_min" in r]
    return {"max_batch": promote.get("max_batch", 1), "drain": promote.get("drain", True),
            "batches": [b["brokers"] for b in result["plan"]["batches"]],
            "promote_s": round((step["finished_ms"] - step["started_ms"]) / 1000, 1),
            "lost": (result.get("probe") or {}).get("lost"), **figures(run_dir),
            "isr_headroom_min": min(headroom, default=None), "guard": [], "status": record["status"]}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cases", default="1:drain,2:drain,2:nodrain",
                   help="promote.max_batch:drain|nodrain, one rollout each")
    p.add_argument("--start-delay", type=float, default=20.0, help="seconds a restarted broker stays down")
    p.add_argument("--traffic", type=int, default=1000, help="records/s of user traffic (0: none)")
    p.add_argument("--keep", type=Path, help="keep the cluster's and the runs' directories here")
    p.add_argument("--analyse", type=Path, help="print the figures of the runs kept in this directory (--keep)")
    args = p.parse_args()
    if args.analyse:
        done = [d for d in sorted(args.analyse.glob("run-*")) if promoted(d)]
        print_table([analysed(d) for d in done], args.start_delay, args.traffic)
        return
    root = args.keep or Path(tempfile.mkdtemp(prefix="promote-batches-"))
    cluster = LocalCluster.up(root / "cluster", brokers=6, racks=RACKS, start_delay=args.start_delay)
    traffic = None
    rows = []
    try:
        if args.traffic:
            traffic = UserTraffic(distribution.ensure(cluster.state.brokers[0].version), cluster.bootstrap_servers,
                                  TrafficSpec("orders", args.traffic, 1000, 8, 3), root / "traffic").start()
        for n, case in enumerate(args.cases.split(",")):
            max_batch, _, drain = case.partition(":")
            rows.append(promote_once(cluster, root, n, int(max_batch), drain != "nodrain"))
            print(json.dumps(rows[-1]), flush=True)
    finally:
        if traffic:
            print(traffic.stop().line())
        cluster.down()
    print_table(rows, args.start_delay, args.traffic)


def print_table(rows: list[dict], start_delay: float, traffic: int) -> None:
    print(f"\n{start_delay:g} s start delay, {traffic} records/s of user traffic\n"
          "| promote.max_batch | drain | batches | promote step (s) | rolling (s) | looks (s) | lost | probe produce "
          "p99 between → during the rolls (ms) | e2e p99 between → during (ms) | fewest in-sync replicas above min "
          "ISR while a batch was away |\n|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        q, d = r["quiet_p99_ms"], r["rolls_p99_ms"]
        print(f"| {r['max_batch']} | {'yes' if r['drain'] else 'no'} | {r['batches']} | {r['promote_s']:.0f} | "
              f"{r['rolls_s']:.0f} | {r['looks_s']:.0f} | {r['lost']} | {q['produce']} → {d['produce']} | "
              f"{q['e2e']} → {d['e2e']} | {'-' if r['isr_headroom_min'] is None else r['isr_headroom_min']} |")


if __name__ == "__main__":
    main()
