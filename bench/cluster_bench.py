"""Figures for the embedded cluster (issue 2): time to healthy, time to roll one broker, memory.

    .venv/bin/python bench/cluster_bench.py [--repeat 3]

Prints, per repetition: `cluster up` of 1 controller + 3 brokers to healthy; one broker rolled to
the target version and back in the ISR of every partition it hosts; resident memory (sum of
VmRSS) of 1 controller + 4 brokers after some acks=all traffic. Goals on a 2-core machine:
≤ 60 s, ≤ 30 s, ≤ 3 GiB.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from confluent_kafka import Producer

from canary.cluster.distribution import BASELINE_VERSION, TARGET_VERSION, ensure
from canary.cluster.local import LocalCluster
from canary.roundtrip import ensure_topic


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def traffic(bootstrap: str, topic: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for i in range(count):
        producer.produce(topic, value=b"x" * 512, partition=i % 4)
        if i % 10000 == 0:
            producer.poll(0)
    producer.flush(60)


def one_run(root: Path) -> dict[str, float]:
    started = time.monotonic()
    cluster = LocalCluster.up(root, brokers=3, version=BASELINE_VERSION, tie_to_parent=True)
    up_s = time.monotonic() - started
    try:
        ensure_topic(cluster.bootstrap_servers, "bench", [1, 2, 3])
        started = time.monotonic()
        cluster.restart_node(2, version=TARGET_VERSION)  # returns once healthy: back in every ISR
        roll_s = time.monotonic() - started
        cluster.add_broker()
        ensure_topic(cluster.bootstrap_servers, "bench4", [1, 2, 3, 4])
        traffic(cluster.bootstrap_servers, "bench4", 100_000)
        rss = sum(rss_bytes(n.pid) for n in cluster.state.nodes)
    finally:
        cluster.down()
    return {"up_s": up_s, "roll_s": roll_s, "rss_gib": rss / 2**30}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    ensure(BASELINE_VERSION), ensure(TARGET_VERSION)  # fetching is setup, not measured
    runs = []
    for i in range(args.repeat):
        with tempfile.TemporaryDirectory(prefix="kafka-canary-bench-") as tmp:
            runs.append(one_run(Path(tmp) / "c"))
        print(f"run {i + 1}: up {runs[-1]['up_s']:.1f} s, roll {runs[-1]['roll_s']:.1f} s, "
              f"RSS {runs[-1]['rss_gib']:.2f} GiB", flush=True)
    for key, label, goal in (("up_s", "cluster up (1 controller + 3 brokers) to healthy", "<= 60 s"),
                             ("roll_s", f"one broker {BASELINE_VERSION} -> {TARGET_VERSION}, back in ISR", "<= 30 s"),
                             ("rss_gib", "RSS of 1 controller + 4 brokers", "<= 3 GiB")):
        values = [r[key] for r in runs]
        print(f"{label:<55} median {statistics.median(values):6.2f}  max {max(values):6.2f}  (goal {goal})")


if __name__ == "__main__":
    main()
