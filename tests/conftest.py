"""Suite-wide fixtures: a real local Kafka cluster shared by the session, and a sweep that leaves
no Kafka JVM behind, even when a test fails or the run is interrupted."""

from __future__ import annotations

import logging
import os
import signal
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest

from canary import process
from canary.cluster.local import LocalCluster

# kafka-python logs every connection at INFO (Airflow's import raises the root level to INFO): thousands of lines
# that bury a failure's assertion in the report.
logging.getLogger("kafka").setLevel(logging.WARNING)

# Every cluster the suite starts lives under this root, so the final sweep can find its JVMs.
RUN_ROOT = Path(tempfile.mkdtemp(prefix="kafka-canary-tests-"))
# Runs and sweep histories a test does not place itself go there too, never into the user's ~/.local/state.
os.environ.setdefault("KAFKA_CANARY_RUNS", str(RUN_ROOT / "rollouts"))
os.environ.setdefault("KAFKA_CANARY_HISTORY", str(RUN_ROOT / "history"))


@pytest.fixture(scope="session")
def run_root() -> Path:
    return RUN_ROOT


@contextmanager
def running_cluster(name: str, **kwargs) -> Iterator[LocalCluster]:
    """A cluster under the suite's root (`LocalCluster.up` arguments), always stopped afterwards; its JVMs are
    killed even when stopping it fails."""
    cluster = LocalCluster.up(RUN_ROOT / name, tie_to_parent=True, **kwargs)
    try:
        yield cluster
    finally:
        try:
            cluster.down()
        finally:
            process.kill_marked(str(cluster.directory) + "#")


@pytest.fixture(scope="session")
def shared_cluster() -> Iterator[LocalCluster]:
    """One 3-broker baseline cluster for tests that only read or add topics. Tests that change
    brokers start their own with `cluster_factory`."""
    with running_cluster("shared", brokers=3) as cluster:
        yield cluster


@pytest.fixture
def cluster_factory(request) -> Iterator:
    """Starts clusters private to one test (`cluster_factory(brokers=4, ...)`) and always stops them."""
    started: list[LocalCluster] = []
    with ExitStack() as stack:
        def start(**kwargs) -> LocalCluster:
            name = f"{request.node.name[:60]}-{len(started)}"
            started.append(stack.enter_context(running_cluster(name, **kwargs)))
            return started[-1]

        yield start


@pytest.fixture(scope="session")
def spark():
    """One local Spark session for every Spark test (lean: local[2], few shuffle partitions, no UI)."""
    from pyspark.sql import SparkSession

    session = (SparkSession.builder.master("local[2]").appName("kafka-canary-tests")
               .config("spark.sql.shuffle.partitions", "2").config("spark.ui.enabled", "false")
               .config("spark.sql.session.timeZone", "UTC").getOrCreate())
    try:
        yield session
    finally:
        session.stop()


def pytest_configure(config) -> None:
    # SIGTERM (a CI job's time limit, a `kill`) stops the suite as Ctrl-C does: the running test's fixtures torn down
    # and the sweep below run, so no broker a test restarted, nor its delay proxy, outlives the suite.
    signal.signal(signal.SIGTERM, signal.default_int_handler)


def pytest_sessionfinish(session, exitstatus) -> None:
    # Every fixture has been torn down by now. A JVM still alive is a teardown bug: kill it so none
    # outlives the suite, and fail the run so the bug is seen.
    leftover = process.kill_marked(str(RUN_ROOT))
    if leftover:
        print(f"\nFAILED: {len(leftover)} Kafka JVM(s) outlived their tests under {RUN_ROOT}: {leftover}")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture(scope="session")
def docker_client() -> Iterator:
    """A Docker engine for the container tests (tests/docker_engine.py), with the baseline version's Kafka image
    built here; KAFKA_CANARY_IMAGE points at our images, so another version's is built when a test asks for it."""
    from docker_engine import docker_engine

    from canary.containers import images
    from canary.kafka.versions import BASELINE_VERSION

    os.environ["KAFKA_CANARY_IMAGE"] = images.LOCAL
    with docker_engine() as client:
        images.ensure(client, BASELINE_VERSION)
        yield client


@pytest.fixture(scope="session")
def s3(tmp_path_factory) -> Iterator:
    """A real S3-compatible server on 127.0.0.1 (versitygw, tests/object_store.py) for the session."""
    from object_store import s3_server

    with s3_server(tmp_path_factory.mktemp("s3")) as server:
        yield server


@pytest.fixture
def s3_env(s3, monkeypatch):
    """The S3 server, its credentials and endpoint in this process's AWS settings (as a worker has them)."""
    for name, value in s3.env().items():
        monkeypatch.setenv(name, value)
    return s3
