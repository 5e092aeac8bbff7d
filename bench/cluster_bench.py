"""Figures for the embedded cluster (issue 2): time to healthy, time to roll one broker, memory.

    .venv/bin/python bench/cluster_bench.py [--repeat 3] [--security sasl_ssl] [--alternate]

Prints, per repetition: `cluster up` of 1 controller + 3 brokers to healthy; one broker rolled to
the target version and back in the ISR of every partition it hosts; resident memory (sum of
VmRSS) of 1 controller + 4 brokers after some acks=all traffic. Goals on a 2-core machine:
≤ 60 s, ≤ 30 s, ≤ 3 GiB. `--security sasl_ssl` measures a secured cluster (TLS + SCRAM on the client listener);
`--alternate` runs plaintext and sasl_ssl one after the other each repetition, so both see the same machine load.
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
from canary.kafka.clients import PRODUCER_DEFAULTS
from canary.roundtrip import ensure_topic


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def traffic(bootstrap: str, topic: str, count: int, client: dict[str, str]) -> None:
    producer = Producer({**PRODUCER_DEFAULTS, "bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                         **client})
    for i in range(count):
        producer.produce(topic, value=b"x" * 512, partition=i % 4)
        if i % 10000 == 0:
            producer.poll(0)
    producer.flush(60)


def one_run(root: Path, security: str = "plaintext") -> dict[str, float]:
    started = time.monotonic()
    cluster = LocalCluster.up(root, brokers=3, version=BASELINE_VERSION, tie_to_parent=True, security=security)
    up_s = time.monotonic() - started
    client = cluster.client_config()
    try:
        ensure_topic(cluster.bootstrap_servers, "bench", [1, 2, 3], client=client)
        started = time.monotonic()
        cluster.restart_node(2, version=TARGET_VERSION)  # returns once healthy: back in every ISR
        roll_s = time.monotonic() - started
        cluster.add_broker()
        ensure_topic(cluster.bootstrap_servers, "bench4", [1, 2, 3, 4], client=client)
        traffic(cluster.bootstrap_servers, "bench4", 100_000, client)
        rss = sum(rss_bytes(n.pid) for n in cluster.state.nodes)
    finally:
        cluster.down()
    return {"up_s": up_s, "roll_s": roll_s, "rss_gib": rss / 2**30}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--security", choices=("plaintext", "sasl_ssl"), default="plaintext")
    parser.add_argument("--alternate", action="store_true", help="plaintext then sasl_ssl in each repetition")
    args = parser.parse_args()
    ensure(BASELINE_VERSION), ensure(TARGET_VERSION)  # fetching is setup, not measured
    modes = ("plaintext", "sasl_ssl") if args.alternate else (args.security,)
    runs: dict[str, list[dict[str, float]]] = {mode: [] for mode in modes}
    for i in range(args.repeat):
        for mode in modes:
            with tempfile.TemporaryDirectory(prefix="kafka-canary-bench-") as tmp:
                runs[mode].append(one_run(Path(tmp) / "c", mode))
            last = runs[mode][-1]
            print(f"run {i + 1} {mode}: up {last['up_s']:.1f} s, roll {last['roll_s']:.1f} s, "
                  f"RSS {last['rss_gib']:.2f} GiB", flush=True)
    for mode in modes:
        for key, label, goal in (("up_s", "cluster up (1 controller + 3 brokers) to healthy", "<= 60 s"),
                                 ("roll_s", f"one broker {BASELINE_VERSION} -> {TARGET_VERSION}, back in ISR",
                                  "<= 30 s"),
                                 ("rss_gib", "RSS of 1 controller + 4 brokers", "<= 3 GiB")):
            values = [r[key] for r in runs[mode]]
            print(f"{mode:<10} {label:<55} median {statistics.median(values):6.2f}  max {max(values):6.2f}  "
                  f"(goal {goal})")


if __name__ == "__main__":
    main()
