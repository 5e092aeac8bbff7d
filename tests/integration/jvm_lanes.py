"""Builds kafka-canary-lanes (jvm/, the lane awareness of JVM clients) and the tests' Java services with javac
against the Kafka distribution the tests run (its kafka-clients), as `mvn package` would against Maven Central's:
the tests need no Maven build. Returns the classpath a service runs with."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from canary.cluster import distribution

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ROOT / "jvm" / "src" / "main" / "java"
SERVICES = Path(__file__).resolve().parent / "services" / "java"
KAFKA_VERSION = "3.9.2"


def build(out: Path) -> str:
    """Compiles the lanes library and the Java test services into `out`; the classpath to run them."""
    libs = distribution.ensure(KAFKA_VERSION).libs
    classes = out / "classes"
    classes.mkdir(parents=True, exist_ok=True)
    classpath = os.pathsep.join([str(classes), f"{libs}/*"])
    sources = sorted(str(p) for p in (*SOURCES.rglob("*.java"), *SERVICES.glob("*.java")))
    subprocess.run(["javac", "--release", "17", "-Xlint:all", "-Werror", "-cp", classpath, "-d", str(classes),
                    *sources], check=True, capture_output=True, text=True)
    return classpath
