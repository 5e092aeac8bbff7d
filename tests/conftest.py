"""Suite-wide fixtures: a real local Kafka cluster shared by the session, and a sweep that leaves
no Kafka JVM behind, even when a test fails or the run is interrupted."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from canary.cluster import process
from canary.cluster.local import LocalCluster

# Every cluster the suite starts lives under this root, so the final sweep can find its JVMs.
RUN_ROOT = Path(tempfile.mkdtemp(prefix="kafka-canary-tests-"))


@pytest.fixture(scope="session")
def run_root() -> Path:
    return RUN_ROOT


@pytest.fixture(scope="session")
def shared_cluster() -> Iterator[LocalCluster]:
    """One 3-broker baseline cluster for tests that only read or add topics. Tests that change
    brokers start their own with `cluster_factory`."""
    cluster = LocalCluster.up(RUN_ROOT / "shared", brokers=3, tie_to_parent=True)
    try:
        yield cluster
    finally:
        cluster.down()


@pytest.fixture
def cluster_factory(request) -> Iterator:
    """Starts clusters private to one test (`cluster_factory(brokers=4, ...)`) and always stops them."""
    started: list[LocalCluster] = []

    def start(**kwargs) -> LocalCluster:
        directory = RUN_ROOT / f"{request.node.name[:60]}-{len(started)}"
        cluster = LocalCluster.up(directory, tie_to_parent=True, **kwargs)
        started.append(cluster)
        return cluster

    try:
        yield start
    finally:
        for cluster in started:
            try:
                cluster.down()
            finally:
                process.kill_marked(str(cluster.directory) + "#")


def pytest_sessionfinish(session, exitstatus) -> None:
    # Every fixture has been torn down by now. A JVM still alive is a teardown bug: kill it so none
    # outlives the suite, and fail the run so the bug is seen.
    leftover = process.kill_marked(str(RUN_ROOT))
    if leftover:
        print(f"\nFAILED: {len(leftover)} Kafka JVM(s) outlived their tests under {RUN_ROOT}: {leftover}")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
