"""The probe's latency next to Kafka's own: the probe and Kafka's EndToEndLatency tool on the same brokers in the same
window, per broker, with the probe's CPU per message.

    .venv/bin/python bench/probe_vs_e2e.py [--seconds 40] [--rate 20] [--switch-interval-ms 5]

Starts its own 3-broker local cluster. For each broker, a one-partition topic led by that broker (replicas on all
three, acks=all) gets EndToEndLatency's messages (one at a time: send, wait for it to come back, next) while the
probe runs at `--rate` messages per second per partition on its own topic (one partition led by each broker).
Printed per broker: the probe's end-to-end and produce p50/p99 (its observations, sub-millisecond) and
EndToEndLatency's p50/p99; then the probe process's CPU seconds per message. `--switch-interval-ms` sets Python's
thread switch interval in the probe's process (CPython's default 5 ms).

Goals (issue: the gate must see what hurts): the probe's p50 within 1 ms and p99 within 1.5x of EndToEndLatency's.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from canary.cluster import distribution  # noqa: E402
from canary.cluster.local import LocalCluster  # noqa: E402
from canary.observations import Observation  # noqa: E402
from canary.probe.config import ProbeConfig  # noqa: E402
from canary.probe.runner import Probe  # noqa: E402

BROKERS = (1, 2, 3)


def quantile(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] if values else float("nan")


def closed_loop_quantile(values: list[float], q: float) -> float:
    """The quantile a closed loop would have seen in the same time. EndToEndLatency sends one message, waits for it
    to come back, then sends the next: while a broker is slow it takes few samples, so a stall counts once however
    long it lasts. The probe sends at a fixed rate, every sample an equal share of the time. Weighting each of its
    samples by 1 / latency (how many samples a closed loop takes per unit of time at that latency) gives the
    closed loop's view of the same window."""
    values = sorted(v for v in values if v > 0)
    if not values:
        return float("nan")
    weights = [1 / v for v in values]
    target, seen = q * sum(weights), 0.0
    for value, weight in zip(values, weights, strict=True):
        seen += weight
        if seen >= target:
            return value
    return values[-1]


def one_partition_topics(bootstrap: str) -> dict[int, str]:
    """Broker -> a one-partition topic it leads (replicas on every broker)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = {b: f"e2e-latency-{b}" for b in BROKERS}
    new = [NewTopic(t, num_partitions=1, replica_assignment=[[b, *[o for o in BROKERS if o != b]]])
           for b, t in topics.items()]
    for future in admin.create_topics(new).values():
        future.result(30)
    return topics


def end_to_end_latency(dist: distribution.KafkaDistribution, bootstrap: str, topic: str, messages: int,
                       out: dict[str, tuple[float, float, float]]) -> None:
    """Kafka's EndToEndLatency on `topic` (acks=all, 200 bytes); its p50, p99 and mean in ms into out[topic].
    Its percentiles are whole milliseconds cut down (elapsed / 1000 / 1000 in a long): "3" is 3.0-3.99 ms; its
    mean keeps the fraction."""
    text = dist.run_tool("org.apache.kafka.tools.EndToEndLatency", [bootstrap, topic, str(messages), "all", "200"],
                         timeout=600)
    found = re.search(r"Percentiles: 50th = ([\d.]+), 99th = ([\d.]+)", text)
    if not found:
        raise RuntimeError(f"EndToEndLatency printed no percentiles: {text[-500:]}")
    mean = re.search(r"Avg latency: ([\d.]+) ms", text)
    out[topic] = (float(found[1]), float(found[2]), float(mean[1]) if mean else float("nan"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=40.0)
    parser.add_argument("--rate", type=float, default=20.0, help="probe messages per second per partition")
    parser.add_argument("--e2e-messages", type=int, default=4000, help="EndToEndLatency messages per broker")
    parser.add_argument("--switch-interval-ms", type=float, default=None)
    args = parser.parse_args()
    if args.switch_interval_ms is not None:
        sys.setswitchinterval(args.switch_interval_ms / 1000)
    with tempfile.TemporaryDirectory(prefix="probe-vs-e2e-") as tmp:
        cluster = LocalCluster.up(Path(tmp) / "cluster", brokers=3, tie_to_parent=True)
        try:
            measure(cluster, args, Path(tmp))
        finally:
            cluster.down()


def measure(cluster: LocalCluster, args: argparse.Namespace, tmp: Path) -> None:
    dist = distribution.ensure(distribution.BASELINE_VERSION)
    topics = one_partition_topics(cluster.bootstrap_servers)
    path = tmp / "probe.jsonl"
    # The rollout's settings: the default intervals, observations to a file (the topic would add its own traffic)
    probe = Probe(ProbeConfig(cluster.bootstrap_servers, rate=args.rate, observations_file=str(path),
                              observations_topic=""))
    probe.start()
    me = psutil.Process()
    try:
        while not (probe.ready() and sorted(probe.view.leaders.values()) == list(BROKERS)):
            time.sleep(0.5)
        time.sleep(3)  # warm-up
        tool: dict[str, tuple[float, float, float]] = {}
        threads = [threading.Thread(target=end_to_end_latency,
                                    args=(dist, cluster.bootstrap_servers, t, args.e2e_messages, tool))
                   for t in topics.values()]
        cpu_before, start_ms = me.cpu_times(), time.time() * 1000
        for t in threads:
            t.start()
        time.sleep(args.seconds)
        cpu_after, end_ms = me.cpu_times(), time.time() * 1000
        for t in threads:
            t.join()
    finally:
        probe.stop(drain=20)
    window = [o for o in map(Observation.from_json, path.read_text().splitlines())
              if start_ms <= o.send_ts < end_ms and o.outcome == "delivered"]
    print(f"window {args.seconds:g} s, probe {args.rate:g} msg/s per partition, EndToEndLatency "
          f"{args.e2e_messages} messages per broker, switch interval {sys.getswitchinterval() * 1000:g} ms")
    print(f"{'broker':>6}  {'probe e2e p50/p99 ms':>22}  {'probe produce p50/p99/mean ms':>32}  "
          f"{'EndToEndLatency p50/p99/mean':>30}  {'probe e2e p50/p99 as a closed loop':>36}")
    for broker in BROKERS:
        mine = [o for o in window if o.leader == broker]
        e2e = [o.e2e_latency_ms for o in mine if o.e2e_latency_ms is not None]
        produce = [o.produce_latency_ms for o in mine if o.produce_latency_ms is not None]
        kafka = tool.get(topics[broker], (float("nan"),) * 3)
        mean = statistics.fmean(produce) if produce else float("nan")
        print(f"{broker:>6}  {quantile(e2e, .5):>10.2f} / {quantile(e2e, .99):>8.2f}  "
              f"{quantile(produce, .5):>12.2f} / {quantile(produce, .99):>8.2f} / {mean:>6.2f}  "
              f"{kafka[0]:>12.0f} / {kafka[1]:>6.0f} / {kafka[2]:>6.2f}  "
              f"{closed_loop_quantile(e2e, .5):>24.2f} / {closed_loop_quantile(e2e, .99):>8.2f}")
    print("(EndToEndLatency's percentiles are whole milliseconds cut down: 3 means 3.0-3.99 ms; its mean is exact. "
          "The last column weights each probe sample by 1/latency: the share of samples a closed loop like "
          "EndToEndLatency would have taken at that latency)")
    cpu = (cpu_after.user + cpu_after.system) - (cpu_before.user + cpu_before.system)
    print(f"probe process CPU: {cpu:.2f} s for {len(window)} messages = {cpu / max(1, len(window)) * 1000:.3f} ms "
          f"per message (median e2e {statistics.median(o.e2e_latency_ms for o in window):.2f} ms)")


if __name__ == "__main__":
    main()
