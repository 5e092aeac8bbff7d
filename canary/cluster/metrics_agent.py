"""The Prometheus JMX exporter (io.prometheus.jmx:jmx_prometheus_javaagent, as Strimzi runs it) attached to every
broker we start, so each broker serves its own metrics — request handler and network idle, request times per
request type, bytes and messages in and out, log flushes, ISR changes, CPU and GC — on a loopback port.

The agent jar is fetched from Maven Central once into the cache (beside the Kafka releases); the exporter config
(resources/jmx-exporter.yaml) names the MBeans it reads, so a scrape stays cheap."""

from __future__ import annotations

import fcntl
import shutil
import subprocess
from pathlib import Path

from canary.cluster.distribution import RESOURCES, cache_dir, require_maven
from canary.errors import SetupError

AGENT_VERSION = "1.0.1"
ARTIFACT = f"io.prometheus.jmx:jmx_prometheus_javaagent:{AGENT_VERSION}"
CONFIG = RESOURCES / "jmx-exporter.yaml"


def agent_jar() -> Path:
    """The agent jar, fetched on first use. Raises SetupError when Maven is missing or cannot fetch it."""
    target = cache_dir() / "jmx-exporter" / AGENT_VERSION
    jar = target / f"jmx_prometheus_javaagent-{AGENT_VERSION}.jar"
    if jar.exists():
        return jar
    mvn = require_maven()
    target.mkdir(parents=True, exist_ok=True)
    with open(target / ".lock", "w") as lock:  # one fetch across processes
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not jar.exists():
            staging = target / "staging"
            shutil.rmtree(staging, ignore_errors=True)
            done = subprocess.run([mvn, "-B", "-q", "dependency:copy", f"-Dartifact={ARTIFACT}",
                                   f"-DoutputDirectory={staging}"], capture_output=True, text=True, timeout=600)
            fetched = staging / jar.name
            if done.returncode != 0 or not fetched.exists():
                lines = [line for line in (done.stdout + done.stderr).splitlines() if "[ERROR]" in line]
                raise SetupError(f"Maven could not fetch {ARTIFACT} (the brokers' metrics agent): "
                                 f"{(lines or ['no output'])[0][:400]}")
            fetched.rename(jar)
            shutil.rmtree(staging, ignore_errors=True)
    return jar


def agent_option(port: int) -> str:
    """The JVM option that serves the broker's metrics on 127.0.0.1:`port` (/metrics)."""
    return f"-javaagent:{agent_jar()}=127.0.0.1:{port}:{CONFIG}"
