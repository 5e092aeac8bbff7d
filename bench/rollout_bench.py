"""Figures for the broker rollout engine (issue 5), on a 4-broker local cluster with a 2-minute probe window.

    .venv/bin/python bench/rollout_bench.py [--window 2m] [--engine spark] [--runtime docker]

1. A good canary (3.9.2 → 4.1.2, one canary broker, finalize): total rollout time, the time outside the probe
   window (goal ≤ 90 s), and acknowledged probe messages lost across the whole rollout (goal 0).
2. Severe faults on a fresh cluster each: a canary with message.max.bytes=100 (every produce to its partitions
   fails) and a canary behind a 500 ms delaying proxy: time from the fault going live (the canary broker
   restarted with it) to the start of the rollback (goal ≤ 60 s), and the rollback verified.

`--runtime docker`: the same on a cluster of containers (as `kafka-canary cluster up --runtime docker` makes it),
through the docker deployer; the delay-proxy scenario needs the local cluster and is left out there.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from canary.cluster.distribution import BASELINE_VERSION, TARGET_VERSION, ensure
from canary.cluster.local import LocalCluster
from canary.containers import engine, images
from canary.containers.cluster import DockerCluster
from canary.rollout.broker import BROKER, Rollout
from canary.rollout.broker.spec import load_spec
from canary.rollout.core import run_all


def lost_and_acked(rollout: Rollout) -> tuple[int, int]:
    """Across every probe run of the rollout (preflight, deploy, gate, promote/rollback, verify)."""
    lost = acked = 0
    for e in rollout.audit.entries():
        if e["action"] in ("probe", "probe during the rolls"):
            lost, acked = lost + e["lost"], acked + e["acked"]
    window = rollout.record.window
    for lane in ((window.probe if window else None) or {}).values():
        lost, acked = lost + lane.lost, acked + lane.acked
    return lost, acked


def first(rollout: Rollout, step: str, action: str) -> int:
    return next(e["ts_ms"] for e in rollout.audit.entries() if e["step"] == step and e["action"] == action)


@contextmanager
def cluster_of(runtime: str, root: Path, name: str) -> Iterator[dict]:
    """A fresh 4-broker cluster on the runtime; yields the spec's cluster section for it."""
    if runtime == "docker":
        client = engine.connect()
        label = f"rb{os.getpid()}{name.replace('-', '')}"
        DockerCluster.up(client, label, brokers=4)
        try:
            yield {"deployer": "docker", "docker": {"name": label}}
        finally:
            DockerCluster.down(client, label)
        return
    cluster = LocalCluster.up(root / name, brokers=4)
    try:
        yield {"dir": str(cluster.directory)}
    finally:
        cluster.down()


def scenario(root: Path, name: str, window: str, engine: str, runtime: str = "local", **spec) -> Rollout:
    with cluster_of(runtime, root, name) as section:
        raw = {"cluster": section, "canary": {"count": 1},
               "probe": {"window": window, "interim_interval": "15s"}, "judge": {"engine": engine},
               "run_id": name, **spec}
        rollout = Rollout(load_spec(raw), root / "runs" / name)
        started = time.monotonic()
        result = run_all(BROKER, rollout)
        rollout.total_s = time.monotonic() - started
        rollout.result = result
        return rollout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--window", default="2m")
    parser.add_argument("--engine", default="spark", choices=("spark", "inline"))
    parser.add_argument("--good-change", default="version", choices=("version", "config"),
                        help="the good canary: the upgrade to the target (default), or a harmless config change on "
                             "the baseline version (the engine's own cost without a version difference)")
    parser.add_argument("--only-good", action="store_true", help="skip the fault scenarios")
    parser.add_argument("--runtime", default="local", choices=("local", "docker"),
                        help="the brokers as local JVMs (default) or containers on a Docker engine")
    args = parser.parse_args()
    ensure(BASELINE_VERSION), ensure(TARGET_VERSION)
    if args.runtime == "docker":  # the images are setup, not measured
        os.environ.setdefault("KAFKA_CANARY_IMAGE", images.LOCAL)
        client = engine.connect()
        images.ensure(client, BASELINE_VERSION), images.ensure(client, TARGET_VERSION)
    root = Path(tempfile.mkdtemp(prefix="rollout-bench-"))

    change = ({"version": TARGET_VERSION} if args.good_change == "version"
              else {"config": {"log.retention.check.interval.ms": "290000"}})
    good = scenario(root, "good", args.window, args.engine, args.runtime, change=change)
    judged = good.state.record.step("judge")  # absent when an interim look stopped the window
    analysis_s = judged.took_s if judged else 0.0
    window_s = good.spec.probe.window
    lost, acked = lost_and_acked(good)
    print(f"load average at the end: {os.getloadavg()}")
    print(f"good canary: outcome {good.result.outcome} ({good.result.verdict}), total {good.total_s:.0f} s, "
          f"probe window {window_s:.0f} s, outside the window {good.total_s - window_s:.0f} s "
          f"(of which the final {args.engine} analysis {analysis_s:.0f} s)")
    for name, step in good.state.record.steps.items():
        print(f"  {name:<14} {step.took_s:6.1f} s")
    print(f"  acked probe messages lost across the rollout: {lost} of {acked}")

    faults = [("bad-config", {"change": {"config": {"message.max.bytes": "100"}}})]
    if args.runtime == "local":
        faults.append(("delay-500ms", {"change": {"version": TARGET_VERSION}, "fault": {"client_delay_ms": 500}}))
    for name, spec in () if args.only_good else faults:
        bad = scenario(root, name, args.window, args.engine, args.runtime, **spec)
        live = first(bad, "deploy-canary", "broker restarted")
        rollback = first(bad, "rollback", "step started")
        lost, acked = lost_and_acked(bad)
        print(f"{name}: outcome {bad.result.outcome} ({bad.result.status}), fault live → rollback started "
              f"{(rollback - live) / 1000:.0f} s, total {bad.total_s:.0f} s, acked lost {lost} of {acked}; "
              f"reason: {(bad.result.reason or '')[:160]}")
    print(f"load average at the end: {os.getloadavg()}")
    print(json.dumps({"runs": str(root / "runs")}))


if __name__ == "__main__":
    main()
