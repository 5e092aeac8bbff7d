"""The README's main job, for now: the embedded cluster up, a round trip through every partition
leader, what it saw printed, the cluster down. Later issues grow it into the full rollout."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from canary.cluster.distribution import BASELINE_VERSION
from canary.cluster.local import LocalCluster
from canary.roundtrip import ensure_topic, round_trip

DEMO_TOPIC = "kafka-canary-demo"


def run_demo(brokers: int = 3, version: str = BASELINE_VERSION, directory: Path | None = None,
             keep: bool = False) -> int:
    """Returns 0 when every partition's message was acknowledged (acks=all) and read back."""
    workdir = Path(directory) if directory else Path(tempfile.mkdtemp(prefix="kafka-canary-demo-"))
    started = time.monotonic()
    print(f"starting a {brokers}-broker KRaft cluster (Kafka {version}) in {workdir} ...", flush=True)
    cluster = LocalCluster.up(workdir, brokers=brokers, version=version, tie_to_parent=not keep)
    try:
        print(f"healthy in {time.monotonic() - started:.1f}s; bootstrap servers {cluster.bootstrap_servers}")
        ensure_topic(cluster.bootstrap_servers, DEMO_TOPIC, [b.node_id for b in cluster.state.brokers])
        results = round_trip(cluster.bootstrap_servers, DEMO_TOPIC)
        print(f"\nround trip on {DEMO_TOPIC} (acks=all, min.insync.replicas={max(1, min(3, brokers) - 1)}):")
        print(f"{'partition':>9} {'leader':>6} {'replicas':<10} {'isr':<10} {'ack ms':>8} {'e2e ms':>8}  result")
        for r in results:
            print(f"{r.partition:>9} {r.leader:>6} {','.join(map(str, r.replicas)):<10} "
                  f"{','.join(map(str, r.isr)):<10} {r.ack_ms or '-':>8} {r.e2e_ms or '-':>8}  "
                  f"{'ok' if r.ok else 'FAILED: ' + (r.error or 'not acknowledged')}")
        leaders = sorted({r.leader for r in results})
        ok = all(r.ok for r in results)
        print(f"\n{sum(r.ok for r in results)}/{len(results)} partitions round-tripped; leaders seen: {leaders}")
        return 0 if ok else 1
    finally:
        if keep:
            print(f"cluster left running; stop it with `kafka-canary cluster down --dir {workdir}`")
        else:
            cluster.down()
            print(f"cluster down; total {time.monotonic() - started:.1f}s")
