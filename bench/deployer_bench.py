"""What a broker roll costs on each runtime: one broker rolled to the target version and back, through the rollout's
own deployers, each time until it is back in the ISR of every partition it hosts; the local JVM cluster and the
container cluster alternate in each repetition, so both see the same machine load.

    .venv/bin/python bench/deployer_bench.py [--repeat 3]

Needs a Docker engine (DOCKER_HOST or the local socket) and the images (`kafka-canary image build` of both versions;
KAFKA_CANARY_IMAGE=kafka-canary/kafka:{version} builds them when missing).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from canary.cluster.distribution import BASELINE_VERSION, TARGET_VERSION, ensure
from canary.cluster.local import LocalCluster
from canary.containers import engine, images
from canary.containers.cluster import DockerCluster
from canary.kafka.wait import wait_until
from canary.rollout import guard
from canary.rollout.deployers.base import Deployer, DockerSettings
from canary.rollout.deployers.docker import DockerDeployer
from canary.rollout.deployers.local import LocalDeployer
from canary.roundtrip import ensure_topic


@contextmanager
def local_cluster(root: Path) -> Iterator[Deployer]:
    cluster = LocalCluster.up(root / "local", brokers=3, tie_to_parent=True)
    try:
        yield LocalDeployer(cluster.directory)
    finally:
        cluster.down()


@contextmanager
def docker_cluster(root: Path) -> Iterator[Deployer]:
    client = engine.connect()
    name = f"bench{os.getpid()}"
    DockerCluster.up(client, name, brokers=3)
    try:
        yield DockerDeployer(DockerSettings(name))
    finally:
        DockerCluster.down(client, name)


def roll_and_back(deployer: Deployer) -> tuple[float, float]:
    """Seconds to roll broker 2 to the target and back to the baseline, each until it is back in every ISR."""
    ensure_topic(deployer.bootstrap_servers, "bench", [1, 2, 3])
    before = next(b for b in deployer.brokers() if b.broker_id == 2)
    times = []
    for version in (TARGET_VERSION, BASELINE_VERSION):
        started = time.monotonic()
        deployer.roll_broker(2, version=version, config=before.config, rack=None, client_delay_ms=0)
        wait_until("broker 2 back in the ISR", 180, lambda: guard.learner_missing(deployer.bootstrap_servers, {}, [2]),
                   None)
        times.append(time.monotonic() - started)
    return times[0], times[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    os.environ.setdefault("KAFKA_CANARY_IMAGE", images.LOCAL)
    ensure(BASELINE_VERSION), ensure(TARGET_VERSION)  # fetching and image building are setup, not measured
    client = engine.connect()
    images.ensure(client, BASELINE_VERSION), images.ensure(client, TARGET_VERSION)
    runtimes: dict[str, Callable] = {"local JVMs": local_cluster, "docker containers": docker_cluster}
    figures: dict[str, list[tuple[float, float]]] = {name: [] for name in runtimes}
    for i in range(args.repeat):
        for name, runtime in runtimes.items():
            with tempfile.TemporaryDirectory(prefix="deployer-bench-") as tmp, runtime(Path(tmp)) as deployer:
                figures[name].append(roll_and_back(deployer))
            up, back = figures[name][-1]
            print(f"run {i + 1} {name}: to {TARGET_VERSION} {up:.1f} s, back to {BASELINE_VERSION} {back:.1f} s "
                  f"(load {os.getloadavg()[0]:.1f})", flush=True)
    for name, runs in figures.items():
        for j, label in enumerate((f"to {TARGET_VERSION}", f"back to {BASELINE_VERSION}")):
            values = [r[j] for r in runs]
            print(f"{name:<18} one broker {label:<14} back in the ISR: median {statistics.median(values):5.1f} s, "
                  f"min {min(values):5.1f}, max {max(values):5.1f}")
    ratios = [d[0] / loc[0] for d, loc in zip(figures["docker containers"], figures["local JVMs"], strict=True)]
    print(f"docker / local, same repetition, roll to {TARGET_VERSION}: {', '.join(f'{r:.2f}' for r in ratios)}")


if __name__ == "__main__":
    main()
