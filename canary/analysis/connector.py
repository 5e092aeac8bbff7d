"""Spark's Kafka source for the installed pyspark: its jars (minus what pyspark already ships) resolved from Maven
Central once, with the POM shipped in this package (resources/kafka-connector.pom.xml), and cached in
$KAFKA_CANARY_CACHE/spark-kafka-<version> (default ~/.cache/kafka-canary)."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from importlib.resources import as_file, files
from pathlib import Path

from canary.analysis.errors import ConnectorError, SparkSubmitError

POM = files("canary.analysis") / "resources" / "kafka-connector.pom.xml"
# Some Maven mirrors lack the newest spark-token-provider; its API is stable, so an older one is the fallback.
TOKEN_PROVIDER_FALLBACK = "4.0.0"
MAVEN_TIMEOUT_S = 600


def pyspark_home() -> tuple[Path, str]:
    """The installed pyspark's folder (bin/spark-submit, jars/) and version; SparkSubmitError without pyspark."""
    try:
        import pyspark
    except ImportError:
        raise SparkSubmitError("the Spark analysis needs pyspark: pip install 'kafka-canary[spark]' "
                               "(or use the inline engine)") from None
    return Path(pyspark.__file__).parent, pyspark.__version__


def cache_dir() -> Path:
    return Path(os.environ.get("KAFKA_CANARY_CACHE") or Path.home() / ".cache" / "kafka-canary")


def kafka_connector_jars() -> list[Path]:
    """The Kafka source jars for the installed pyspark, resolved on first use. Raises ConnectorError when Maven is
    missing or cannot resolve them."""
    home, version = pyspark_home()
    target = cache_dir() / f"spark-kafka-{version}"
    done = target / ".complete"
    if not done.exists():
        if shutil.which("mvn") is None:
            raise ConnectorError("Maven (mvn) is needed to fetch Spark's Kafka source; install it or read "
                                 "observations from files")
        target.mkdir(parents=True, exist_ok=True)
        # Concurrent analyses (parallel tasks) resolve once: the others wait for the lock, then find it done.
        with open(target / ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not done.exists():
                _resolve(target, home / "jars", version)
                done.touch()
    return sorted(target.glob("*.jar"))


def _resolve(target: Path, shipped_jars: Path, version: str) -> None:
    """mvn dependency:copy-dependencies into target/staging, then the jars pyspark does not ship into target."""
    errors = []
    staging = target / "staging"
    with as_file(POM) as pom:
        for token_version in (version, TOKEN_PROVIDER_FALLBACK):
            shutil.rmtree(staging, ignore_errors=True)
            proc = subprocess.run(
                ["mvn", "-q", "-B", "-f", str(pom), "dependency:copy-dependencies", "-DincludeScope=runtime",
                 f"-Dspark.version={version}", f"-Dtoken.provider.version={token_version}",
                 f"-DoutputDirectory={staging}"], capture_output=True, text=True, timeout=MAVEN_TIMEOUT_S)
            if proc.returncode == 0:
                break
            errors.append(_last_line(proc.stdout + proc.stderr))
        else:
            raise ConnectorError(f"cannot resolve spark-sql-kafka-0-10 {version} from Maven Central: "
                                 + "; ".join(errors))
    shipped = {artifact(p.name) for p in shipped_jars.glob("*.jar")}
    for jar in staging.glob("*.jar"):
        if artifact(jar.name) not in shipped:
            shutil.move(str(jar), target / jar.name)
    shutil.rmtree(staging, ignore_errors=True)


def _last_line(output: str) -> str:
    """Maven's error in short: its last [ERROR] line that says something."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("[ERROR]") and len(line) > len("[ERROR]") + 1]
    return (errors or lines or ["no output"])[0 if errors else -1][:500]


def artifact(jar_name: str) -> str:
    """'kafka-clients-3.9.2.jar' -> 'kafka-clients'."""
    parts = jar_name.removesuffix(".jar").split("-")
    while parts and parts[-1][:1].isdigit():
        parts.pop()
    return "-".join(parts)
