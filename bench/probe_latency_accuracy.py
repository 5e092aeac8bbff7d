"""Probe latency accuracy: how much extra latency the probe measures on one broker's partitions when a
known delay is injected in front of that broker (a delaying TCP proxy on its client listener).

    .venv/bin/python bench/probe_latency_accuracy.py [--delay-ms 50] [--seconds 30] [--rate 20]

Starts its own 3-broker local cluster and runs the probe twice on it, for `--seconds` each: first with
no delay, then with broker 2 restarted behind a `--delay-ms` proxy (`restart_node(client_delay_ms=)`).
Latencies come from the probe's own observations (send, ack and receive times per message).

Two estimates of the added latency are printed, for produce (acknowledgement) and end-to-end latency:
- concurrent: the delayed broker's partition vs the other partitions in the same window, minus the
  same difference without the delay (what the gate sees: canary vs baseline side by side);
- before/after: the delayed broker's partition with the delay vs without it.
Goal: the produce-latency increase within 10 % of the injected delay. End-to-end latency grows by
more than the delay: the consumer's fetch requests to that broker are delayed too, so a message that
arrives while no fetch is waiting there waits for the next one.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from canary.cluster.local import LocalCluster  # noqa: E402
from canary.observations import Observation  # noqa: E402
from canary.probe.config import ProbeConfig  # noqa: E402
from canary.probe.runner import Probe  # noqa: E402

DELAYED_BROKER = 2


def run_probe(cluster: LocalCluster, seconds: float, rate: float, path: Path, topic: str) -> list[Observation]:
    """Runs the probe until every broker leads one partition, then `seconds` more; returns the
    observations sent in that measured window and delivered."""
    probe = Probe(ProbeConfig(cluster.bootstrap_servers, topic=topic, rate=rate, observations_file=str(path),
                              observations_topic="", metadata_interval=1, reconcile_interval=3))
    probe.start()
    try:
        deadline = time.monotonic() + 120
        while not (probe.ready() and sorted(probe.view.leaders.values()) == [1, 2, 3]):
            if time.monotonic() > deadline:
                raise RuntimeError(f"probe not ready with one partition per broker: leaders {probe.view.leaders}")
            time.sleep(0.5)
        time.sleep(2)  # warm-up: connections and first fetches
        start_ms = time.time() * 1000
        time.sleep(seconds)
        end_ms = time.time() * 1000
    finally:
        summary = probe.stop(drain=30)
    lost = sum(t["lost"] for t in summary.lanes.values())
    if lost:
        print(f"WARNING: the probe counted {lost} lost messages")
    observed = [Observation.from_json(line) for line in path.read_text().splitlines()]
    return [o for o in observed if start_ms <= o.send_ts < end_ms and o.outcome == "delivered"]


def medians(observed: list[Observation]) -> dict[str, dict[str, float]]:
    """{'delayed'|'others': {'produce': median ms, 'e2e': median ms, 'n': count}}"""
    groups = {"delayed": [o for o in observed if o.leader == DELAYED_BROKER],
              "others": [o for o in observed if o.leader not in (None, DELAYED_BROKER)]}
    return {name: {"produce": statistics.median(o.produce_latency_ms for o in group),
                   "e2e": statistics.median(o.e2e_latency_ms for o in group), "n": len(group)}
            for name, group in groups.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--delay-ms", type=float, default=50.0)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--rate", type=float, default=20.0, help="messages per second per partition")
    args = parser.parse_args(argv)
    print(f"cpu cores: {psutil.cpu_count()}, load average at start: {psutil.getloadavg()}")
    work = Path(tempfile.mkdtemp(prefix="probe-latency-"))
    cluster = LocalCluster.up(work / "c", brokers=3, tie_to_parent=True)
    try:
        before = medians(run_probe(cluster, args.seconds, args.rate, work / "before.jsonl", "latency-before"))
        cluster.restart_node(DELAYED_BROKER, client_delay_ms=args.delay_ms)
        during = medians(run_probe(cluster, args.seconds, args.rate, work / "during.jsonl", "latency-during"))
    finally:
        cluster.down()
    print(f"injected: {args.delay_ms:g} ms on client->broker bytes of broker {DELAYED_BROKER}; "
          f"probe {args.rate:g} msg/s per partition, {args.seconds:g} s per phase")
    for phase, m in (("no delay", before), ("delayed", during)):
        print(f"  {phase:<9} broker {DELAYED_BROKER}'s partition: produce p50 {m['delayed']['produce']:.1f} ms, "
              f"e2e p50 {m['delayed']['e2e']:.1f} ms (n={m['delayed']['n']}); other partitions: produce p50 "
              f"{m['others']['produce']:.1f} ms, e2e p50 {m['others']['e2e']:.1f} ms (n={m['others']['n']})")
    for kind in ("produce", "e2e"):
        concurrent = ((during["delayed"][kind] - during["others"][kind])
                      - (before["delayed"][kind] - before["others"][kind]))
        before_after = during["delayed"][kind] - before["delayed"][kind]
        for name, value in (("concurrent", concurrent), ("before/after", before_after)):
            error = 100 * (value - args.delay_ms) / args.delay_ms
            verdict = "within 10 %" if abs(error) <= 10 else "NOT within 10 %"
            print(f"{kind:>7} latency increase ({name}): {value:.1f} ms vs injected {args.delay_ms:g} ms "
                  f"-> {error:+.1f} % ({verdict})")
    print(f"load average at end: {psutil.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
