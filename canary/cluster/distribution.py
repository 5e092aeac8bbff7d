"""Kafka releases as local jar directories, resolved from Maven Central (or taken from KAFKA_HOME).

A distribution is a flat `libs/` directory holding the broker, the storage tool, the admin and
feature tools and a logging backend. It is fetched once per version into the cache directory
(`$KAFKA_CANARY_CACHE`, default `~/.cache/kafka-canary`) by Maven, using the pom shipped beside
this module. `KAFKA_HOME` (an unpacked Kafka release) is used instead for the version it holds.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from canary.errors import FeatureError, SetupError
from canary.kafka import features
from canary.kafka.secrets import scrub_text
from canary.kafka.versions import BASELINE_VERSION, TARGET_VERSION, parse_version

MIN_JAVA = 17

RESOURCES = Path(__file__).parent / "resources"
POM = RESOURCES / "kafka-distribution.pom.xml"
_HOME_JAR_RE = re.compile(r"^kafka_2\.1[23]-(\d+\.\d+\.\d+)\.jar$")


def release_of(version: str) -> str:
    """The feature release a version belongs to: '4.1.2' -> '4.1'."""
    major, minor, _ = parse_version(version)
    return f"{major}.{minor}"


def cache_dir() -> Path:
    return Path(os.environ.get("KAFKA_CANARY_CACHE") or Path.home() / ".cache" / "kafka-canary")


@dataclass(frozen=True)
class KafkaDistribution:
    """One Kafka release on disk. `libs` holds every jar the broker and tools need."""

    version: str
    libs: Path
    source: str  # "maven" or "KAFKA_HOME"

    @property
    def release(self) -> str:
        return release_of(self.version)

    @property
    def uses_log4j2(self) -> bool:
        return parse_version(self.version)[0] >= 4

    def log_config_props(self, tool: bool) -> list[str]:
        """JVM flags that point the logging backend at the shipped config."""
        name = ("tools-" if tool else "") + ("log4j2.properties" if self.uses_log4j2 else "log4j.properties")
        path = RESOURCES / name
        if self.uses_log4j2:
            return [f"-Dlog4j2.configurationFile={path}"]
        return [f"-Dlog4j.configuration=file:{path}"]

    def java_command(self, main_class: str, args: list[str], jvm_opts: list[str] | None = None,
                     tool: bool = True) -> list[str]:
        """The command line that runs `main_class` of this release."""
        return [
            require_java(), *(jvm_opts or []), *self.log_config_props(tool),
            "-cp", f"{self.libs}/*", main_class, *args,
        ]

    def run_tool(self, main_class: str, args: list[str], timeout: float = 120, secret_args: list[str] | None = None,
                 private_dir: Path | None = None) -> str:
        """Runs one of the release's command-line tools; returns stdout, raises SetupError on failure.

        `secret_args` (appended to `args`) never reach a command line, where any local user could read them: the
        main class and every argument go to a 0600 argument file in `private_dir` (`java @file`), removed after;
        they are also cut out of the error message."""
        jvm = ["-Xmx256m", "-XX:TieredStopAtLevel=1", "-Xshare:auto"]
        argfile = None
        if secret_args:
            argfile = Path(private_dir or tempfile.gettempdir()) / f".kafka-tool-{os.getpid()}-{os.urandom(4).hex()}"
            fd = os.open(argfile, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write("".join(_argfile_quote(a) + "\n" for a in [main_class, *args, *secret_args]))
            cmd = [*self.java_command(main_class, [], jvm)[:-1], f"@{argfile}"]
        else:
            cmd = self.java_command(main_class, args, jvm)
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            raise SetupError(f"Kafka {self.version} tool {main_class} did not finish in {timeout:.0f}s") from exc
        finally:
            if argfile:
                argfile.unlink(missing_ok=True)
        if done.returncode != 0:
            detail = (done.stderr.strip() or done.stdout.strip())[-2000:]
            detail = scrub_text(detail, secret_args or [])
            raise SetupError(f"Kafka {self.version} tool {main_class} {args[:1]} failed: {detail}")
        return done.stdout


def _argfile_quote(arg: str) -> str:
    """One argument of a `java @file` argument file: quoted, with backslashes and quotes escaped."""
    return '"' + arg.replace("\\", "\\\\").replace('"', '\\"') + '"'


@cache
def require_java() -> str:
    """Path of a Java 17+ `java`; one clear error when there is none."""
    home = os.environ.get("JAVA_HOME")
    java = str(Path(home) / "bin" / "java") if home and (Path(home) / "bin" / "java").exists() else shutil.which("java")
    if not java:
        raise SetupError(f"Java {MIN_JAVA} or newer is needed to run Kafka: install a JDK "
                         f"(e.g. `apt install openjdk-17-jdk-headless`) or set JAVA_HOME")
    out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60).stderr
    match = re.search(r'version "(\d+)(?:\.(\d+))?', out)
    major = int(match[1]) if match else 0
    if major == 1 and match and match[2]:  # "1.8.0" style
        major = int(match[2])
    if major < MIN_JAVA:
        raise SetupError(f"Java {MIN_JAVA} or newer is needed to run Kafka, found {java} ({out.splitlines()[:1]}): "
                         f"install openjdk-17 or point JAVA_HOME at it")
    return java


def require_maven() -> str:
    mvn = shutil.which("mvn")
    if not mvn:
        raise SetupError("Maven is needed to fetch Kafka from Maven Central: install it (e.g. `apt install maven`), "
                         "or point KAFKA_HOME at an unpacked Kafka release")
    return mvn


def _kafka_home_distribution(version: str) -> KafkaDistribution | None:
    home = os.environ.get("KAFKA_HOME")
    if not home:
        return None
    libs = Path(home) / "libs"
    if not libs.is_dir():
        raise SetupError(f"KAFKA_HOME={home} has no libs/ directory; point it at an unpacked Kafka release")
    for jar in libs.iterdir():
        match = _HOME_JAR_RE.match(jar.name)
        if match and match[1] == version:
            return KafkaDistribution(version, libs, "KAFKA_HOME")
    return None


def installed(version: str) -> KafkaDistribution | None:
    """The distribution of `version` if it is already on disk (KAFKA_HOME or the cache)."""
    parse_version(version)
    found = _kafka_home_distribution(version)
    if found:
        return found
    target = cache_dir() / "kafka" / version
    if (target / ".complete").exists():
        return KafkaDistribution(version, target / "libs", "maven")
    return None


def ensure(version: str) -> KafkaDistribution:
    """The distribution of `version`, fetched from Maven Central into the cache when missing.

    Raises SetupError for a malformed or unreleased version, or when Java or Maven is missing.
    """
    found = installed(version)
    if found:
        require_java()
        return found
    require_java()
    mvn = require_maven()
    root = cache_dir() / "kafka"
    root.mkdir(parents=True, exist_ok=True)
    target = root / version
    # One fetch per version at a time, across processes.
    with open(root / f".{version}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (target / ".complete").exists():
            return KafkaDistribution(version, target / "libs", "maven")
        staging = Path(tempfile.mkdtemp(prefix=f".{version}-", dir=root))
        try:
            _maven_fetch(mvn, version, staging / "libs")
            (staging / ".complete").write_text(version + "\n")
            shutil.rmtree(target, ignore_errors=True)
            staging.rename(target)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return KafkaDistribution(version, target / "libs", "maven")


def _maven_fetch(mvn: str, version: str, libs: Path) -> None:
    profile = "logging-log4j2" if parse_version(version)[0] >= 4 else "logging-reload4j"
    cmd = [mvn, "-B", "-q", "-Dstyle.color=never", "-f", str(POM), f"-Dkafka.version={version}",
           f"-Dkafka.libs={libs}", "-P", profile, "dependency:copy-dependencies"]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    except subprocess.TimeoutExpired as exc:
        raise SetupError(f"fetching Kafka {version} from Maven Central took over 15 min; check the network") from exc
    if done.returncode == 0 and any(libs.glob("kafka_2.13-*.jar")):
        return
    output = done.stdout + done.stderr
    if re.search(r"(Could not find artifact|was not found in|could not be resolved).*org\.apache\.kafka", output):
        raise SetupError(f"Kafka {version} is not a released version on Maven Central "
                         f"(org.apache.kafka:kafka_2.13:{version} not found); pick a release listed at "
                         f"https://kafka.apache.org/downloads, e.g. {BASELINE_VERSION} or {TARGET_VERSION}")
    tail = "\n".join(output.strip().splitlines()[-15:])
    raise SetupError(f"Maven could not fetch Kafka {version} (exit {done.returncode}); "
                     f"check access to Maven Central:\n{tail}")


def release_levels(release: str, tool: KafkaDistribution) -> dict[str, int]:
    """Every feature level release `release` (e.g. '4.1') maps to, per `tool`'s feature command."""
    if not re.fullmatch(r"\d+\.\d+(-IV\d+)?", release):
        raise FeatureError(f"release {release!r} is not a feature release; use MAJOR.MINOR such as 4.1")
    if parse_version(tool.version)[0] < 4:
        raise FeatureError(f"Kafka {tool.version} cannot map a release to feature levels (needs 4.0 or newer); "
                           f"name the levels with --feature name=level instead")
    out = tool.run_tool("org.apache.kafka.tools.FeatureCommand",
                        ["--bootstrap-server", "127.0.0.1:1", "version-mapping", "--release-version", release])
    levels = {m[1]: int(m[2]) for m in re.finditer(r"^([a-z.]+)=(\d+)", out, re.M)}
    if "metadata.version" not in levels:
        raise FeatureError(f"Kafka {tool.version} gave no feature mapping for release {release}: {out.strip()}")
    return levels


def finalize_levels(versions: Iterable[str], release: str | None = None) -> dict[str, int]:
    """The feature levels to finalize on a cluster whose nodes run `versions`: those `release` (default: the
    release every node runs) maps to, per the newest version's tool, except levels of 0 and the features
    never raised unless named (canary.kafka.features.NOT_BY_DEFAULT). Raises FeatureError, SetupError."""
    versions = list(versions)
    newest = max(versions, key=parse_version)
    oldest = min(versions, key=parse_version)
    release = release or release_of(oldest)
    mapped = release_levels(release, ensure(newest))
    return {name: level for name, level in mapped.items() if name not in features.NOT_BY_DEFAULT and level > 0}
