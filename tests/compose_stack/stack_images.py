"""The compose stack's images, built on this machine (no registry is reachable from it): stand-ins for the official
postgres, apache/airflow, apache/spark and prom/prometheus images on our Debian base (images/), then the stack's
own image from deploy/Dockerfile on the Airflow stand-in, and our Kafka image. Each is built once and cached by the
engine under a tag that names what it was built from, so a changed lock or Dockerfile builds it again.

Python packages reach the Airflow images as a wheelhouse built on the host (`pip wheel` from requirements.lock):
containers here cannot verify TLS to PyPI, the host can."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import docker
from docker.errors import ImageNotFound

from canary.containers import images

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).parent / "images"
KAFKA_VERSION = "3.9.2"
# What deploy/Dockerfile copies from the repository.
STACK_SOURCES = ("deploy/Dockerfile", "requirements.lock", "pyproject.toml", "README.md", "canary", "spark_jobs",
                 "plugins", "dags")


@dataclass(frozen=True)
class StackImages:
    """The environment variables docker-compose.yaml reads its images from."""
    postgres: str
    airflow: str
    stack: str
    spark: str
    prometheus: str
    kafka_template: str

    def environment(self) -> dict[str, str]:
        return {"POSTGRES_IMAGE": self.postgres, "AIRFLOW_IMAGE": self.airflow,
                "KAFKA_CANARY_STACK_IMAGE": self.stack, "SPARK_IMAGE": self.spark,
                "PROMETHEUS_IMAGE": self.prometheus, "KAFKA_IMAGE": self.kafka_template.format(version=KAFKA_VERSION),
                "KAFKA_CANARY_IMAGE": self.kafka_template}


def _digest(*parts: Path | str) -> str:
    """What an image is built from, as a tag: files (bytecode caches left out, as from the contexts) and words."""
    h = hashlib.sha256()
    for part in parts:
        if isinstance(part, Path):
            for f in sorted(p for p in ([part] if part.is_file() else part.rglob("*"))
                            if p.is_file() and "__pycache__" not in p.parts):
                h.update(str(f.relative_to(REPO)).encode())
                h.update(f.read_bytes())
        else:
            h.update(part.encode())
    return h.hexdigest()[:12]


def _build(client: docker.DockerClient, tag: str, fill: Callable[[Path], None], args: dict[str, str],
           dockerfile: str | None = None) -> str:
    """Builds `tag` from a context `fill` writes, unless the engine already has it."""
    try:
        client.images.get(tag)
        return tag
    except ImageNotFound:
        pass
    with tempfile.TemporaryDirectory(prefix="stack-image-") as tmp:
        fill(Path(tmp))
        images.build_context(client, Path(tmp), tag, args, dockerfile)
    return tag


def _copy(sources: dict[str, Path]) -> Callable[[Path], None]:
    """A context of `sources` (context path -> file or folder)."""
    def fill(context: Path) -> None:
        for name, source in sources.items():
            if source.is_dir():
                shutil.copytree(source, context / name, symlinks=True, dirs_exist_ok=True,
                                ignore=shutil.ignore_patterns("__pycache__"))
            else:
                (context / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy(source, context / name)
    return fill


def wheelhouse(target: Path) -> Path:
    """Wheels of every locked package (sdists built here; the Postgres drivers are locked, from the distributed extra)
    and the build backend."""
    done = target / ".complete"
    if not done.exists():
        target.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--disable-pip-version-check", "--no-deps",
                        "-r", str(REPO / "requirements.lock"), "setuptools>=68", "wheel",
                        "-w", str(target)], check=True, timeout=1800)
        done.touch()
    return target


def build(client: docker.DockerClient, cache: Path) -> StackImages:
    base = images.ensure_debian(client)
    lock = REPO / "requirements.lock"
    airflow_version = next(line.split("==")[1] for line in lock.read_text().splitlines()
                           if line.startswith("apache-airflow=="))
    postgres = _build(client, f"kafka-canary/postgres:{_digest(HERE / 'postgres')}",
                      _copy({".": HERE / "postgres"}), {"BASE": base})
    prometheus = _build(client, f"kafka-canary/prometheus:{_digest(HERE / 'prometheus')}",
                        _copy({".": HERE / "prometheus"}), {"BASE": base})
    import pyspark

    spark = _build(client, f"kafka-canary/spark:{pyspark.__version__}-{_digest(HERE / 'spark')}",
                   _copy({".": HERE / "spark", "spark": Path(pyspark.__file__).parent}),
                   {"BASE": images.ensure_jre(client)})

    def airflow_context(context: Path) -> None:  # the wheelhouse only when the image is built
        wheels = wheelhouse(cache / f"wheelhouse-{_digest(lock)}")
        _copy({".": HERE / "airflow", "wheels": wheels})(context)

    airflow_tag = f"kafka-canary/airflow:{airflow_version}-{_digest(HERE / 'airflow', lock)}"
    airflow = _build(client, airflow_tag, airflow_context, {"BASE": base, "AIRFLOW_VERSION": airflow_version})
    # deploy/Dockerfile as users build it, on the Airflow stand-in, from a context of what it copies (docker-py reads
    # no Dockerfile.dockerignore); the sources are mounted over the copy anyway
    stack = _build(client, f"kafka-canary/stack:{_digest(*(REPO / name for name in STACK_SOURCES), airflow)}",
                   _copy({name: REPO / name for name in STACK_SOURCES}), {"AIRFLOW_IMAGE": airflow},
                   dockerfile="deploy/Dockerfile")
    kafka = images.ensure(client, KAFKA_VERSION, images.LOCAL)
    assert kafka == images.LOCAL.format(version=KAFKA_VERSION)
    return StackImages(postgres, airflow, stack, spark, prometheus, images.LOCAL)
