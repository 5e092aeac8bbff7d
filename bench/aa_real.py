"""A/A on real data: no change at all, every broker of a real 3-broker cluster in turn labelled the canary. Each
false ROLLBACK is a rollout the gate would have refused for nothing.

    .venv/bin/python bench/aa_real.py [--slices 6] [--loads 0,1500] [--before 30] [--window 120] [--settle 60]
                                      [--keep DIR]
    .venv/bin/python bench/aa_real.py --files DIR/load-0.jsonl,...   # analyse kept runs again

For each load (records/s of 1 kB into each broker's partition of the load topic; 0: the probe alone) the probe runs
on one fresh cluster for slices x (before + window) seconds with the brokers' metrics read every 5 s. Each slice is
cut into a `before` part (what a rollout's preflight probe measures) and a window; each broker in turn is labelled
canary (its partitions' messages and its readings; the others baseline) and the window judged by the default judge
as a rollout judges it: at its interim looks (every `--interim` seconds, where a critical regression rolls back) and
at its final look, without and with the calibration by the before part (canary/judge/README.md). Printed: per load,
the analyses, the false rollbacks (at any look) and the metrics that decided them; the goal is at most 1 %.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from canary.broker_metrics.sources import ExporterSource  # noqa: E402
from canary.cluster.local import LocalCluster  # noqa: E402
from canary.judge import Aggregates, JudgeConfig, judge  # noqa: E402
from canary.judge.calibration import Calibration  # noqa: E402
from canary.observations import BrokerReading, Observation, Record, read_file_counted  # noqa: E402
from canary.probe.config import ProbeConfig  # noqa: E402
from canary.probe.load import Load, LoadConfig  # noqa: E402
from canary.probe.runner import Probe  # noqa: E402


def record_run(cluster: LocalCluster, out: Path, seconds: float, load_rate: float) -> list[Record]:
    """The probe (and the load) for `seconds` on the cluster; its observations and readings."""
    config = ProbeConfig(bootstrap_servers=cluster.bootstrap_servers, rate=20, duration=None, run_id=out.stem,
                         producer_id=out.stem, observations_file=str(out), broker_metrics_interval=5.0)
    probe = Probe(config, broker_metrics=ExporterSource(cluster.metrics_endpoints()))
    probe.start()
    load = None
    if load_rate:
        load = Load(LoadConfig(cluster.bootstrap_servers, load_rate, 1000, interval=5.0, run_id=out.stem),
                    emit=probe.sink.emit)
        load.start()
    try:
        time.sleep(seconds)
    finally:
        if load is not None:
            load.stop()
        probe.stop()
    return read_file_counted(out)[0]


def relabelled(records: list[Record], canary: int) -> list[Record]:
    """The records as if broker `canary` were the canary: its partitions' messages and its readings."""
    out: list[Record] = []
    for r in records:
        broker = r.broker if isinstance(r, BrokerReading) else r.leader
        out.append(dataclasses.replace(r, lane="canary" if broker == canary else "baseline"))
    return out


def time_of(r: Record) -> float:
    return r.send_ts


def analyse(records: list[Record], brokers: list[int], slices: int, before_s: float, window_s: float,
            settle_s: float, interim_s: float = 30.0) -> list[dict]:
    """One analysis per slice and canary broker: the window's verdict without and with the calibration, the first
    look that rolled back deciding. The first `settle_s` are left out: a cluster just started (JIT, first segments)
    is not the steady fleet a rollout meets."""
    config = JudgeConfig()
    start = min(time_of(r) for r in records if isinstance(r, Observation)) + settle_s * 1000
    results = []
    for i in range(slices):
        t0 = start + i * (before_s + window_s) * 1000
        t1, t2 = t0 + before_s * 1000, t0 + (before_s + window_s) * 1000
        before = [r for r in records if t0 <= time_of(r) < t1]
        window = [r for r in records if t1 <= time_of(r) < t2]
        looks = [t1 + k * interim_s * 1000 for k in range(1, int(window_s // interim_s) + 1)
                 if k * interim_s < window_s] + [t2]
        for canary in brokers:
            labelled = relabelled(window, canary)
            row = {"slice": i, "canary": canary}
            for name, calibration in (("plain", None), ("calibrated", Calibration.from_observations(before))):
                for at in looks:
                    agg = Aggregates.from_observations([r for r in labelled if time_of(r) < at],
                                                       int(config.bucket_s * 1000))
                    v = judge(agg, config, final=at == t2, before=calibration)
                    failed = [m for m in v["metrics"] if m["decision"] == "FAIL"]
                    row[name] = (v["verdict"], [m["name"] for m in failed], [m["reason"] for m in failed],
                                 round((at - t1) / 1000))
                    if v["verdict"] == "ROLLBACK":
                        break
            results.append(row)
    return results


def record(rate: float, args: argparse.Namespace) -> list[Record]:
    """One run of the probe (and the load at `rate`) on a fresh cluster, long enough for every slice."""
    with tempfile.TemporaryDirectory(prefix="aa-real-") as tmp:
        cluster = LocalCluster.up(Path(tmp) / "cluster", brokers=3)
        try:
            seconds = args.settle + args.slices * (args.before + args.window) + 5
            print(f"load {rate:g} records/s per partition: probing for {seconds:.0f}s", flush=True)
            out = (args.keep or Path(tmp)) / f"load-{rate:g}.jsonl"
            out.parent.mkdir(parents=True, exist_ok=True)
            return record_run(cluster, out, seconds, rate)
        finally:
            cluster.down()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--slices", type=int, default=6)
    p.add_argument("--loads", default="0,1500", help="load rates to run, records/s per partition (0: none)")
    p.add_argument("--before", type=float, default=30.0, help="seconds of each slice's before part")
    p.add_argument("--window", type=float, default=120.0, help="seconds of each slice's window")
    p.add_argument("--settle", type=float, default=60.0, help="seconds after the cluster's start left out")
    p.add_argument("--interim", type=float, default=30.0, help="seconds between the window's interim looks")
    p.add_argument("--keep", type=Path, help="keep each run's observations here (load-<rate>.jsonl)")
    p.add_argument("--files", help="analyse these kept runs instead of running the probe")
    args = p.parse_args()
    if not 0 < args.interim <= args.window:
        p.error(f"--interim must be more than 0 and at most the window ({args.window:g}s)")
    runs = [(Path(f).stem, read_file_counted(f)[0]) for f in args.files.split(",")] if args.files else (
        (f"load-{rate:g}", record(rate, args)) for rate in (float(x) for x in args.loads.split(",")))
    for label, records in runs:
        brokers = sorted({r.leader for r in records if isinstance(r, Observation) and r.leader is not None})
        results = analyse(records, brokers, args.slices, args.before, args.window, args.settle, args.interim)
        for row in results:
            print(f"  slice {row['slice']} canary {row['canary']}: plain {row['plain'][0]} {row['plain'][1]} at "
                  f"{row['plain'][3]}s; calibrated {row['calibrated'][0]} {row['calibrated'][1]} at "
                  f"{row['calibrated'][3]}s")
            for reason in row["calibrated"][2]:
                print(f"    {reason}")
        for name in ("plain", "calibrated"):
            false = [r for r in results if r[name][0] == "ROLLBACK"]
            why = Counter(m for r in false for m in r[name][1])
            verdicts = Counter(r[name][0] for r in results)
            print(f"{label}: {name}: {len(false)} false rollback(s) in {len(results)} analyses "
                  f"({100 * len(false) / max(1, len(results)):.1f} %; verdicts {dict(verdicts)}); deciding metrics "
                  f"{dict(why)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
