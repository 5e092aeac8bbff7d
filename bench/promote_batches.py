"""How long promotion takes one broker at a time and in batches, on the same fleet. The first figures of issue 37.

    .venv/bin/python bench/promote_batches.py [--batches 1,2] [--keep DIR]

The fleet: six embedded brokers of Kafka 3.9.2 over three racks (a, a, b, b, c, c), so every topic of replication 3
has one replica in each rack and the two brokers of a rack may be away together. For each `--batches` value, one
rollout of a harmless change (`num.io.threads`: 8, Kafka's default, for the first, 9 for the next, …: the restarts are
the whole change) on that fleet:
preflight, deploy-canary (broker 2) and warm-up run as steps; the verdict is then recorded as PROMOTE by the bench
(the gate is not what is measured here), and promote and verify run as steps with `promote.max_batch` set. The probe
runs through every roll, as in a real rollout. Printed per run: the plan's batches, the promote step's seconds (its
brokers' rolls and the post-promotion probe), the acknowledged messages the probe lost during the rolls, and the
fewest in-sync replicas above min.insync.replicas the roll's own ISR looks saw while a batch was away.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from canary.cluster.local import LocalCluster  # noqa: E402
from canary.judge import PROMOTE  # noqa: E402
from canary.judge.brief import Brief  # noqa: E402
from canary.rollout.broker import BROKER, Rollout  # noqa: E402
from canary.rollout.broker.spec import load_spec  # noqa: E402
from canary.rollout.core.verdict import record_verdict  # noqa: E402

RACKS = ["a", "a", "b", "b", "c", "c"]


def promote_once(cluster: LocalCluster, root: Path, max_batch: int) -> dict:
    # a change each run (8 I/O threads, Kafka's default, then 9, ...): a broker already as desired is not restarted
    change = {"num.io.threads": str(7 + max_batch)}
    spec = load_spec({"cluster": {"dir": str(cluster.directory)}, "change": {"config": change},
                      "canary": {"brokers": [2], "control": "none"}, "judge": {"engine": "inline"},
                      "probe": {"preflight": "3s", "calibration": "3s"}, "capacity": "not_required",
                      "promote": {"max_batch": max_batch}, "run_id": f"batches-{max_batch}"})
    rollout = Rollout(spec, root / f"run-{max_batch}")
    for name in ("preflight", "deploy-canary", "warm-up"):
        BROKER.step(name)(rollout)
    rollout.step = "judge"
    record_verdict(rollout, Brief(verdict=PROMOTE, reason="recorded by bench/promote_batches.py"))
    BROKER.step("promote")(rollout)
    BROKER.step("verify")(rollout)
    step = rollout.state.record.step("promote")
    result = (step.result if step else None) or {}
    plan = result.get("plan") or {"batches": [{"brokers": [r["broker"]]} for r in result.get("rolled", [])]}
    headroom = [r["isr_headroom_min"] for r in result.get("rolled", []) if "isr_headroom_min" in r]
    return {"max_batch": max_batch, "batches": [b["brokers"] for b in plan["batches"]],
            "promote_s": step.took_s if step else None, "lost": (result.get("probe") or {}).get("lost"),
            "isr_headroom_min": min(headroom, default=None), "status": str(rollout.state.status)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--batches", default="1,2", help="promote.max_batch values, one rollout each")
    p.add_argument("--keep", type=Path, help="keep the cluster's and the runs' directories here")
    args = p.parse_args()
    root = args.keep or Path(tempfile.mkdtemp(prefix="promote-batches-"))
    cluster = LocalCluster.up(root / "cluster", brokers=6, racks=RACKS)
    rows = []
    try:
        for max_batch in (int(v) for v in args.batches.split(",")):
            rows.append(promote_once(cluster, root, max_batch))
            print(json.dumps(rows[-1]), flush=True)
    finally:
        cluster.down()
    print("\n| promote.max_batch | batches | promote step (s) | lost during the rolls | fewest in-sync replicas above "
          "min ISR while a batch was away | status |\n|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['max_batch']} | {r['batches']} | {r['promote_s']:.0f} | {r['lost']} | "
              f"{'-' if r['isr_headroom_min'] is None else r['isr_headroom_min']} | {r['status']} |")


if __name__ == "__main__":
    main()
