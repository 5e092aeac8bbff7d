"""The ground truth for bench/capacity_eval.py: the harm a change does to a whole fleet, measured with Kafka's own
ProducerPerformance and ConsumerPerformance on a fresh 3-broker cluster with the change on every broker, next to
the same measurements on a cluster with the default config.

    .venv/bin/python bench/capacity_truth.py [--cases NAME,...] [--records 60000]

Per cluster, on a 3-partition topic (replication 3, acks=all, 500 B records): the producer's p50/p95/p99 latency at a
fixed 3,000 records/s, its maximum throughput (unthrottled), and a consumer's throughput reading everything back.
Printed: one JSON line per cluster, then a table with each change's figures as ratios to the default's.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from bench.capacity_eval import CASES  # noqa: E402
from canary.cluster import distribution  # noqa: E402
from canary.cluster.local import LocalCluster  # noqa: E402
from canary.cluster.traffic import PRODUCED  # noqa: E402


def producer_performance(dist, bootstrap: str, topic: str, records: int, throughput: int) -> dict:
    text = dist.run_tool("org.apache.kafka.tools.ProducerPerformance",
                         ["--topic", topic, "--num-records", str(records), "--record-size", "500",
                          "--throughput", str(throughput), "--producer-props", f"bootstrap.servers={bootstrap}",
                          "acks=all"], timeout=900)
    found = PRODUCED.findall(text)
    if not found:
        raise RuntimeError(f"ProducerPerformance printed no summary: {text[-500:]}")
    _, per_s, mb_s, _, _, p50, p95, p99 = found[-1]
    return {"records_per_s": float(per_s), "mb_per_s": float(mb_s), "p50_ms": int(p50), "p95_ms": int(p95),
            "p99_ms": int(p99)}


def consumer_performance(dist, bootstrap: str, topic: str, records: int) -> float:
    """MB/s reading `records` back from the start."""
    text = dist.run_tool("org.apache.kafka.tools.ConsumerPerformance",
                         ["--bootstrap-server", bootstrap, "--topic", topic, "--messages", str(records),
                          "--timeout", "60000"], timeout=900)
    rows = [line.split(",") for line in text.splitlines() if line.count(",") >= 5 and line[:1].isdigit()]
    if not rows:
        raise RuntimeError(f"ConsumerPerformance printed no figures: {text[-500:]}")
    return float(rows[-1][3])


def measure(root: Path, name: str, config: dict[str, str], records: int) -> dict:
    cluster = LocalCluster.up(root / name, brokers=3, config=config)
    try:
        bootstrap = cluster.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bootstrap})
        for future in admin.create_topics([NewTopic("truth-fixed", 3, 3), NewTopic("truth-max", 3, 3)]).values():
            future.result(30)
        dist = distribution.ensure(cluster.state.brokers[0].version)
        fixed = producer_performance(dist, bootstrap, "truth-fixed", 3000 * 40, 3000)
        top = producer_performance(dist, bootstrap, "truth-max", records, -1)
        consumed = consumer_performance(dist, bootstrap, "truth-max", records)
        return {"case": name, "fixed_3000_per_s": fixed, "max_records_per_s": top["records_per_s"],
                "consumer_mb_per_s": consumed}
    finally:
        cluster.down()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cases", default=",".join(CASES))
    p.add_argument("--records", type=int, default=600_000, help="records of the unthrottled runs")
    args = p.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="capacity-truth-") as tmp:
        for name in ["default", *args.cases.split(",")]:
            row = measure(Path(tmp), name, CASES[name][0] if name != "default" else {}, args.records)
            rows.append(row)
            print(json.dumps(row), flush=True)
    base = rows[0]
    print("\n| change | producer p50 / p95 / p99 ms at 3,000/s | max produce ×default | consumer ×default |")
    print("|---|---|---|---|")
    for r in rows:
        f = r["fixed_3000_per_s"]
        print(f"| {r['case']} | {f['p50_ms']} / {f['p95_ms']} / {f['p99_ms']} | "
              f"{r['max_records_per_s'] / base['max_records_per_s']:.2f} | "
              f"{r['consumer_mb_per_s'] / base['consumer_mb_per_s']:.2f} |")


if __name__ == "__main__":
    main()
