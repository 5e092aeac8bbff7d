"""Does the gate see what hurts? Real broker rollouts under load on a fresh 3-broker local cluster each: changes
that cut capacity (which the light probe cannot see) and harmless ones, with the default judge.

    .venv/bin/python bench/capacity_eval.py [--runs 2] [--window 90s] [--rate 3000] [--cases NAME,...]
    .venv/bin/python bench/capacity_eval.py --traffic 2000 [--runs 3] [--first 0] [--window 2m] [--cases NAME,...]

Each run: one canary broker (broker 2, then 3, ...), the change, the window with the load (`--rate` records/s of
1 kB into each broker's partition) and the brokers' metrics read every 2 s, the default judge (engine inline).
With `--traffic N` the spec is the default one instead (every topic led, capacity required, load auto: none while
the real traffic is representative) on a cluster that carries its own traffic for the whole rollout: Kafka's
ProducerPerformance at N records/s of 1 kB in total (acks=all) into an 8-partition user topic, and
ConsumerPerformance reading it; `--traffic 0` is the same default spec on an idle cluster.
Printed per run: the outcome, the metrics that failed (and so decided), the time from the window's start to the
verdict, the window's load per lane and the canary's share of client traffic in the window. A harmful change should
roll back, a harmless one promote.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from canary.cluster import distribution  # noqa: E402
from canary.cluster.local import LocalCluster  # noqa: E402
from canary.cluster.node_config import SMALL_MACHINE  # noqa: E402
from canary.cluster.traffic import TrafficSpec, UserTraffic  # noqa: E402
from canary.rollout.broker import BROKER, Rollout  # noqa: E402
from canary.rollout.broker.spec import load_spec  # noqa: E402
from canary.rollout.core import RunSummary, run_all  # noqa: E402

# name -> (broker config overrides, harmful?). bench/capacity_truth.py measures the harm on a whole fleet: on a
# 2-core machine the thread and queue cuts halve the handler pool's headroom but cost one producer no throughput
# (docs/bench.md, the gate under load).
CASES: dict[str, tuple[dict[str, str], bool]] = {
    "one-io-and-network-thread": ({"num.io.threads": "1", "num.network.threads": "1"}, True),
    "one-network-thread": ({"num.network.threads": "1"}, True),
    "flush-every-message": ({"log.flush.interval.messages": "1"}, True),
    "request-queue-of-one": ({"queued.max.requests": "1", "num.io.threads": "1"}, True),
    "one-io-thread": ({"num.io.threads": "1"}, True),
    "broker-recompresses-gzip": ({"compression.type": "gzip"}, True),
    "tiny-socket-buffers": ({"socket.send.buffer.bytes": "2048", "socket.receive.buffer.bytes": "2048"}, True),
    "flush-every-millisecond": ({"log.flush.interval.ms": "1", "log.flush.scheduler.interval.ms": "1"}, True),
    "broker-recompresses-gzip-9": ({"compression.type": "gzip", "compression.gzip.level": "9"}, True),
    "fetch-responses-of-1-kib": ({"fetch.max.bytes": "1024"}, True),
    "segments-of-1-mib": ({"log.segment.bytes": "1048576"}, True),
    "flush-every-10-messages": ({"log.flush.interval.messages": "10"}, True),
    # Harm that lands on the baseline brokers: a follower that waits for 1 MB or 50 ms before it replicates holds
    # up every acks=all write its leaders take; one that never waits floods its leaders with fetch requests.
    "slow-follower": ({"replica.fetch.min.bytes": "1000000", "replica.fetch.wait.max.ms": "50"}, True),
    "follower-floods-its-leaders": ({"replica.fetch.wait.max.ms": "0", "num.replica.fetchers": "4"}, True),
    # A restart with nothing changed: the value the embedded cluster already runs. Kafka's default (8) is not one
    # here: it doubles the embedded brokers' 4 request handler threads, and on two cores that made the canary's
    # acks=all produce 2-10 % slower at the median in every idle run (docs/bench.md, "No-op rollouts on an idle
    # cluster").
    "no-op": ({"num.io.threads": SMALL_MACHINE["num.io.threads"]}, False),
    "cleaner-backoff": ({"log.cleaner.backoff.ms": "15001"}, False),
    "more-io-threads": ({"num.io.threads": "10"}, False),
    "more-network-threads": ({"num.network.threads": "5"}, False),
    "retention-check-less-often": ({"log.retention.check.interval.ms": "600000"}, False),
}


def run_case(root: Path, name: str, attempt: int, window: str, rate: float, traffic: int | None = None) -> dict:
    """One rollout of case `name`: under `rate` records/s of load per partition, or with `traffic` (records/s of
    real client traffic in total; 0: none) on the default spec."""
    config, harmful = CASES[name]
    canary = 2 + attempt % 2
    cluster = LocalCluster.up(root / f"{name}-{attempt}", brokers=3)
    user_traffic = None
    try:
        raw = {"cluster": {"dir": str(cluster.directory)}, "change": {"config": config},
               "canary": {"brokers": [canary]}, "probe": {"window": window, "interim_interval": "15s"},
               "judge": {"engine": "inline"}, "broker_metrics": {"interval": "2s"},
               "load": {"rate": rate, "record_size": 1000}, "run_id": f"{name}-{attempt}"}
        if traffic is not None:
            del raw["load"]
            if traffic:
                user_traffic = UserTraffic(distribution.ensure(cluster.state.brokers[0].version),
                                           cluster.bootstrap_servers, TrafficSpec("orders", traffic, 1000, 8, 3),
                                           root / f"{name}-{attempt}-traffic").start()
                time.sleep(15)  # the tools' JVMs up and their traffic steady before preflight measures it
        run_dir = root / "runs" / f"{name}-{attempt}"
        rollout = Rollout(load_spec(raw), run_dir)
        result = run_all(BROKER, rollout)
        window_state = rollout.state.window
        # the analysis directory is kept relative to the run's directory
        verdict = rollout.state.verdict
        analysis = run_dir / ((verdict.analysis if verdict else None) or "-") / "verdict.json"
        metrics = json.loads(analysis.read_text())["metrics"] if analysis.is_file() else []
        load = (window_state.load if window_state else None) or {}
        return {"case": name, "harmful": harmful, "canary": canary, **decision_of(rollout, result),
                "load": {lane: (t["acked_per_s"], (t["produce_latency_ms"] or {}).get("p99"))
                         for lane, t in (load.get("lanes") or {}).items()},
                "brokers": {m["name"].removeprefix("broker_"): (m["canary"].get("value"), m["baseline"].get("value"),
                                                                 m["decision"])
                            for m in metrics if m["kind"] == "broker"},
                "user_traffic": user_traffic.stop().line() if user_traffic else None}
    finally:
        if user_traffic:
            user_traffic.stop()
        cluster.down()


def decision_of(rollout: Rollout, result: RunSummary) -> dict:
    """How a finished rollout (`result`: run_all's) was decided: its outcome and verdict (an INCONCLUSIVE verdict
    rolls back: outcome ROLLBACK), the metrics that failed (a fail-fast verdict's too; else, short of a PROMOTE, the
    start of the reason), the reason, the seconds from the window's start to the verdict and the canary's share of
    client traffic in the window."""
    window_state = rollout.state.window
    verdict_at = next((e["ts_ms"] for e in rollout.audit.entries() if e["action"] == "verdict"), None)
    failed = rollout.state.verdict.failed if rollout.state.verdict else []
    reason = result.reason or ""
    return {"outcome": str(result.outcome), "verdict": result.verdict,
            "failed": failed or ([reason[:80]] if result.outcome != "PROMOTE" else []),
            "reason": reason,
            "decided_after_s": round((verdict_at - window_state.start_ms) / 1000, 1)
            if verdict_at and window_state else None,
            "traffic_share": share_of((window_state.traffic_dict() if window_state else None) or {})}


def share_of(traffic: dict) -> str:
    """The canary's share of client traffic in the window, as one cell: bytes in per canary broker, or why none."""
    shares = [f"{s['bytes_in_per_s']:.2f}×" for s in (traffic.get("share") or {}).values() if "bytes_in_per_s" in s]
    fair = "fair" if traffic.get("fair") else "not judged" if not traffic.get("representative") else "unfair"
    return f"{', '.join(shares) or '-'} ({fair})"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=2)
    p.add_argument("--window", default="90s")
    p.add_argument("--rate", type=float, default=3000)
    p.add_argument("--traffic", type=int, help="the default spec on a cluster carrying this many records/s of real "
                                               "client traffic (0: an idle cluster) instead of --rate's load")
    p.add_argument("--cases", default=",".join(CASES))
    p.add_argument("--first", type=int, default=0, help="the first attempt's number (it picks the canary broker: "
                                                         "2 for even attempts, 3 for odd), to continue a series")
    p.add_argument("--keep", type=Path, help="keep the runs' directories (observations, verdicts) here")
    args = p.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="capacity-eval-") as tmp:
        root = args.keep or Path(tmp)
        for name in args.cases.split(","):
            for attempt in range(args.first, args.first + args.runs):
                started = time.monotonic()
                row = run_case(root, name, attempt, args.window, args.rate, args.traffic)
                row["total_s"] = round(time.monotonic() - started)
                rows.append(row)
                print(json.dumps(row), flush=True)
    print("\n| change | harmful | canary | outcome | failed metrics | verdict after window start (s) | "
          "load acked/s and p99 ms (canary; baseline) | canary's share of client bytes in |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        load = "; ".join(f"{v[0]:.0f}/s, {v[1]} ms" for v in r["load"].values())
        print(f"| {r['case']} | {'yes' if r['harmful'] else 'no'} | {r['canary']} | {r['outcome']} | "
              f"{', '.join(r['failed']) or '-'} | {r['decided_after_s']} | {load or '-'} | {r['traffic_share']} |")
    right = sum((r["outcome"] == "ROLLBACK") == r["harmful"] for r in rows)
    print(f"\n{right} of {len(rows)} runs decided as expected")


if __name__ == "__main__":
    main()
