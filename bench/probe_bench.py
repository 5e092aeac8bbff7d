"""Probe benchmark: highest sustained tracked rate of one probe process, and its CPU and memory at
1,000 msg/s. Starts its own 3-broker local cluster (or uses --bootstrap-servers), prints figures.

    .venv/bin/python bench/probe_bench.py [--seconds 20] [--rates 1000,2000,4000,6000,8000]

A rate is "sustained" when, over the run, the probe sent at least 95 % of the target, every sent
message was tracked to an outcome, nothing was lost or duplicated, and nothing failed to produce.
CPU is the probe process's user+system time over wall time (100 % = one core).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from canary.cluster.local import LocalCluster  # noqa: E402
from canary.probe.config import ProbeConfig  # noqa: E402
from canary.probe.runner import Probe  # noqa: E402


def measure(bootstrap: str, total_rate: float, seconds: float, partitions: int) -> dict:
    me = psutil.Process()
    config = ProbeConfig(bootstrap, topic="probe-bench", rate=total_rate / partitions, observations_topic="",
                         producer_id=f"bench-{int(total_rate)}", client={"linger.ms": "5"})
    probe = Probe(config)
    probe.start()
    time.sleep(3)  # warm-up: connections, first fetches
    cpu0, wall0 = sum(me.cpu_times()[:2]), time.monotonic()
    sent0 = sum(t.counts["sent"] for t in probe.ledger.by_lane().values())
    rss_max = 0
    while time.monotonic() - wall0 < seconds:
        time.sleep(1)
        rss_max = max(rss_max, me.memory_info().rss)
    cpu1, wall1 = sum(me.cpu_times()[:2]), time.monotonic()
    sent1 = sum(t.counts["sent"] for t in probe.ledger.by_lane().values())
    summary = probe.stop(drain=30)
    lane = summary.lanes.get("baseline", {})
    tracked = lane.get("delivered", 0) + lane.get("out_of_order", 0)
    rate = (sent1 - sent0) / (wall1 - wall0)
    ok = (rate >= 0.95 * total_rate and lane.get("lost", 1) == 0 and lane.get("duplicated", 1) == 0
          and lane.get("produce_errors", 1) == 0 and tracked == lane.get("sent", -1))
    return {"target": total_rate, "sent_per_s": round(rate), "tracked": tracked, "sent": lane.get("sent"),
            "lost": lane.get("lost"), "produce_errors": lane.get("produce_errors"),
            "cpu_pct": round(100 * (cpu1 - cpu0) / (wall1 - wall0), 1), "rss_mib": round(rss_max / 2**20, 1),
            "e2e_p50_ms": lane.get("e2e_latency", {}).get("p50_ms"),
            "e2e_p99_ms": lane.get("e2e_latency", {}).get("p99_ms"), "sustained": ok}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--bootstrap-servers")
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--rates", default="1000,2000,4000,6000,8000")
    args = parser.parse_args(argv)
    cluster = None
    bootstrap = args.bootstrap_servers
    if not bootstrap:
        cluster = LocalCluster.up(Path(tempfile.mkdtemp(prefix="probe-bench-")) / "c", brokers=3, tie_to_parent=True)
        bootstrap = cluster.bootstrap_servers
    try:
        print(f"cpu cores: {psutil.cpu_count()}, load average at start: {psutil.getloadavg()}")
        best = None
        for rate in [float(r) for r in args.rates.split(",")]:
            result = measure(bootstrap, rate, args.seconds, partitions=3)
            print(result, flush=True)
            if result["target"] == 1000:
                print(f"at 1,000 msg/s: CPU {result['cpu_pct']} % of one core, RSS {result['rss_mib']} MiB")
            if not result["sustained"]:
                break
            best = result
        print(f"max sustained tracked rate: {best['sent_per_s'] if best else 'below the lowest rate tried'} msg/s "
              f"(every message tracked, zero lost)")
    finally:
        if cluster is not None:
            cluster.down()
    return 0


if __name__ == "__main__":
    sys.exit(main())
