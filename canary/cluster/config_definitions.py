"""Config values checked against a Kafka release's own definitions (the ConfigDef a broker parses its properties
with at start), in one JVM for all keys (`resources/ConfigCheck.java`): what a broker of that release would refuse
at start is known before any broker restarts. Needs the release's jars on this machine (the cache or KAFKA_HOME)."""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from canary.cluster import distribution
from canary.errors import SetupError

SOURCE = distribution.RESOURCES / "ConfigCheck.java"


@dataclass
class DefinitionCheck:
    version: str
    invalid: dict[str, str] = field(default_factory=dict)  # key -> the release's own message
    unknown: list[str] = field(default_factory=list)       # keys the release does not define (custom, or a typo)


def definition_check(version: str, config: Mapping[str, str], timeout: float = 120) -> DefinitionCheck | None:
    """`config` checked against release `version`'s definitions; None when its jars or Java are not on this machine
    (or no compiler for single-file programs: a JRE without jdk.compiler): a running broker checks instead."""
    dist = distribution.installed(version)
    if dist is None or not config:
        return None
    try:
        distribution.require_java()
    except SetupError:  # the jars without Java (a worker that only talks to the cluster)
        return None
    pairs = "".join(f"{_b64(k)} {_b64(v)}\n" for k, v in sorted(config.items()))
    jvm = ["-XX:TieredStopAtLevel=1", "-Xshare:auto", "-Xmx256m"]
    compiled = _compiled(dist)
    if compiled is None:  # run from source (compiled on every run: seconds slower)
        command = dist.java_command(str(SOURCE), [], jvm)
    else:
        command = [distribution.require_java(), *jvm, "-cp", f"{compiled}{os.pathsep}{dist.libs}/*", "ConfigCheck"]
    try:
        done = subprocess.run(command, input=pairs, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        raise SetupError(f"checking config against Kafka {version}'s definitions took over {timeout:.0f}s") from exc
    if done.returncode != 0:
        return None
    result = DefinitionCheck(version)
    for line in done.stdout.splitlines():
        verdict, _, rest = line.partition(" ")
        key, _, message = rest.partition(" ")
        if verdict == "invalid":
            result.invalid[key] = message
        elif verdict == "unknown":
            result.unknown.append(key)
    return result


def _compiled(dist: distribution.KafkaDistribution) -> Path | None:
    """ConfigCheck compiled against `dist` once, in the cache (a second a check instead of four); None without javac."""
    javac = Path(distribution.require_java()).resolve().parent / "javac"
    folder = distribution.cache_dir() / "work" / "config-check" / dist.version
    if (folder / "ConfigCheck.class").exists():
        return folder
    if not javac.exists():
        return None
    staging = folder.with_name(f".{dist.version}-{os.getpid()}")
    done = subprocess.run([str(javac), "-nowarn", "-d", str(staging), "-cp", f"{dist.libs}/*", str(SOURCE)],
                          capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        return None
    folder.parent.mkdir(parents=True, exist_ok=True)
    try:
        staging.rename(folder)  # whole or not at all; another process may have won the race
    except OSError:
        shutil.rmtree(staging, ignore_errors=True)
    return folder


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()
