"""Kafka images: which image runs a version (a template, default the official `apache/kafka:{version}`), making sure
it is on the engine (present, pulled, or built here), and building one from the Maven-resolved jars of any released
version on a configurable base image (`resources/Dockerfile`, laid out like the official image).

The default base is built here too, so nothing needs a registry: a Debian bookworm root made by `debootstrap
--variant=minbase` (imported as `kafka-canary/debian:bookworm`) with Debian's `openjdk-17-jre-headless` on top
(`kafka-canary/jre:17`). `KAFKA_CANARY_IMAGE` sets the template for a machine (e.g. `kafka-canary/kafka:{version}`)."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
import zipfile
from pathlib import Path

import docker
from docker.errors import APIError, BuildError, ImageNotFound

from canary.cluster import distribution, metrics_agent
from canary.errors import SetupError

OFFICIAL = "apache/kafka:{version}"
LOCAL = "kafka-canary/kafka:{version}"
DEBIAN = "kafka-canary/debian:bookworm"
JRE = "kafka-canary/jre:17"
MIRROR = "http://deb.debian.org/debian"
RESOURCES = Path(__file__).parent / "resources"
METRICS_AGENT = "/opt/jmx-exporter/jmx_prometheus_javaagent.jar"
METRICS_CONFIG = "/opt/jmx-exporter/kafka.yaml"
# Bumped whenever the image's layout changes: an image of ours with another revision is built again.
REVISION = "2"
# The official image's bin/ scripts our images carry (health checks and operators use them), each the first of its
# classes the release has: tools moved from kafka.admin (Scala) to org.apache.kafka.tools across releases.
TOOLS = {
    "kafka-broker-api-versions.sh": ("org.apache.kafka.tools.BrokerApiVersionsCommand",
                                     "kafka.admin.BrokerApiVersionsCommand"),
    "kafka-metadata-quorum.sh": ("org.apache.kafka.tools.MetadataQuorumCommand",),
    "kafka-topics.sh": ("org.apache.kafka.tools.TopicCommand", "kafka.admin.TopicCommand"),
    "kafka-configs.sh": ("org.apache.kafka.tools.ConfigCommand", "kafka.admin.ConfigCommand"),
    "kafka-features.sh": ("org.apache.kafka.tools.FeatureCommand", "kafka.admin.FeatureCommand"),
    "kafka-storage.sh": ("org.apache.kafka.tools.StorageTool", "kafka.tools.StorageTool"),
}


def template() -> str:
    """The machine's image template: KAFKA_CANARY_IMAGE, else the official image."""
    return os.environ.get("KAFKA_CANARY_IMAGE") or OFFICIAL


def image_for(version: str, image_template: str | None = None) -> str:
    """The image that runs `version` by the template."""
    tmpl = image_template or template()
    if "{version}" not in tmpl:
        raise SetupError(f"image template {tmpl!r} has no {{version}}; e.g. {OFFICIAL}")
    return tmpl.format(version=version)


def _labels(client: docker.DockerClient, image: str) -> dict[str, str] | None:
    """The image's labels, None when the engine does not have it."""
    try:
        return client.images.get(image).labels or {}
    except ImageNotFound:
        return None


def has_metrics_agent(client: docker.DockerClient, image: str) -> bool:
    """Whether the image carries our metrics agent (images built here do; the official ones do not)."""
    return (_labels(client, image) or {}).get("io.kafka-canary.image") == "kafka"


def _current(client: docker.DockerClient, image: str) -> bool:
    """Whether `image` is on the engine and, when it is one of ours, of this layout's revision."""
    labels = _labels(client, image)
    return labels is not None and (labels.get("io.kafka-canary.image") != "kafka"
                                   or labels.get("io.kafka-canary.revision") == REVISION)


def _image_id(client: docker.DockerClient, image: str) -> str | None:
    try:
        return client.images.get(image).id
    except ImageNotFound:
        return None


def tool_scripts(libs: Path) -> dict[str, str]:
    """bin/ script name -> its text, for the tools whose class the release's jars hold."""
    classes: set[str] = set()
    for jar in libs.glob("kafka*.jar"):
        with zipfile.ZipFile(jar) as z:
            classes.update(n[:-len(".class")].replace("/", ".") for n in z.namelist() if n.endswith(".class"))
    scripts = {}
    for script, candidates in TOOLS.items():
        found = next((c for c in candidates if c in classes), None)
        if found:
            scripts[script] = f'#!/bin/sh\nexec /opt/kafka/bin/kafka-run-class.sh {found} "$@"\n'
    return scripts


def ensure(client: docker.DockerClient, version: str, image_template: str | None = None) -> str:
    """The image of `version`, on the engine: present, else pulled, else (for our own template) built here.
    Raises SetupError saying how to get it."""
    distribution.parse_version(version)
    image = image_for(version, image_template)
    if _current(client, image):
        return image
    if (image_template or template()) == LOCAL:
        stale = _image_id(client, image)
        built = build_kafka(client, version)
        if stale and stale != _image_id(client, built):
            # the older layout's image, now untagged; kept while a container still uses it
            with contextlib.suppress(APIError):
                client.images.remove(stale)
        return built
    try:
        client.images.pull(image)
        return image
    except APIError as exc:
        raise SetupError(f"image {image} (Kafka {version}) is not on the Docker engine and could not be pulled "
                         f"({exc.explanation or exc}); build it here with `kafka-canary image build {version} --tag "
                         f"{image}`, or set the image template (KAFKA_CANARY_IMAGE, e.g. {LOCAL})") from None


def build_kafka(client: docker.DockerClient, version: str, tag: str | None = None, base: str | None = None) -> str:
    """Builds the image of Kafka `version` from its Maven-resolved jars on `base` (default: our JRE image, built
    when missing); returns its tag."""
    tag = tag or LOCAL.format(version=version)
    if base is None:
        base = ensure_jre(client)
    dist = distribution.ensure(version)
    with tempfile.TemporaryDirectory(prefix="kafka-image-") as tmp:
        context = Path(tmp)
        shutil.copytree(dist.libs, context / "libs")
        (context / "config").mkdir()
        log_config = "log4j2.properties" if dist.uses_log4j2 else "log4j.properties"
        shutil.copy(RESOURCES / log_config, context / "config" / log_config)
        (context / "jmx-exporter").mkdir()
        shutil.copy(metrics_agent.agent_jar(), context / "jmx-exporter" / Path(METRICS_AGENT).name)
        shutil.copy(metrics_agent.CONFIG, context / "jmx-exporter" / Path(METRICS_CONFIG).name)
        shutil.copy(distribution.RESOURCES / f"tools-{log_config}", context / "config" / f"tools-{log_config}")
        shutil.copy(RESOURCES / "run", context / "run")
        shutil.copy(RESOURCES / "Dockerfile", context / "Dockerfile")
        (context / "bin").mkdir()
        shutil.copy(RESOURCES / "kafka-run-class.sh", context / "bin" / "kafka-run-class.sh")
        for script, text in tool_scripts(dist.libs).items():
            (context / "bin" / script).write_text(text)
        for executable in (context / "bin").iterdir():
            executable.chmod(0o755)
        log4j, tools_log4j = (
            (f"-Dlog4j2.configurationFile=/opt/kafka/config/{name}" for name in (log_config, f"tools-{log_config}"))
            if dist.uses_log4j2 else
            (f"-Dlog4j.configuration=file:/opt/kafka/config/{name}" for name in (log_config, f"tools-{log_config}")))
        build_context(client, context, tag, {"BASE": base, "KAFKA_VERSION": version, "LOG4J_OPTS": log4j,
                                      "TOOLS_LOG4J_OPTS": tools_log4j, "REVISION": REVISION})
    return tag


def ensure_jre(client: docker.DockerClient) -> str:
    """Our base image (Debian bookworm with Java 17), built once and cached by the engine."""
    try:
        client.images.get(JRE)
        return JRE
    except ImageNotFound:
        pass
    ensure_debian(client)
    with tempfile.TemporaryDirectory(prefix="jre-image-") as tmp:
        Path(tmp, "Dockerfile").write_text(
            f"FROM {DEBIAN}\n"
            "RUN apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "
            "openjdk-17-jre-headless && rm -rf /var/lib/apt/lists/*\n")
        build_context(client, Path(tmp), JRE, {})
    return JRE


def ensure_debian(client: docker.DockerClient) -> str:
    """Our Debian bookworm root image, made by debootstrap once and cached by the engine."""
    try:
        client.images.get(DEBIAN)
        return DEBIAN
    except ImageNotFound:
        pass
    debootstrap = shutil.which("debootstrap") or "/usr/sbin/debootstrap"
    if not Path(debootstrap).exists():
        raise SetupError("debootstrap is needed to build the base image here (Debian: `apt install debootstrap`), "
                         "or pass a base image with Java 17 (--base)")
    with tempfile.TemporaryDirectory(prefix="debian-root-") as root:
        done = subprocess.run([debootstrap, "--variant=minbase", "bookworm", root, MIRROR], capture_output=True,
                              text=True, timeout=900)
        if done.returncode != 0:
            raise SetupError(f"debootstrap could not make a Debian root from {MIRROR}: "
                             f"{(done.stderr or done.stdout).strip().splitlines()[-1:]}")
        tar = subprocess.Popen(["tar", "-C", root, "-c", "."], stdout=subprocess.PIPE)
        assert tar.stdout is not None
        repository, tag = DEBIAN.split(":")
        client.api.import_image_from_stream(tar.stdout, repository=repository, tag=tag)
        if tar.wait() != 0:
            raise SetupError(f"could not read the Debian root made in {root}")
    return DEBIAN


def build_context(client: docker.DockerClient, context: Path, tag: str, args: dict[str, str],
                  dockerfile: str | None = None) -> None:
    """Builds `context` (its Dockerfile, or `dockerfile` inside it) into `tag`; SetupError with the last output."""
    try:
        client.images.build(path=str(context), tag=tag, buildargs=args, network_mode="host", rm=True,
                            forcerm=True, dockerfile=dockerfile)
    except BuildError as exc:
        lines = [str(chunk.get("stream") or chunk.get("error") or "").strip() for chunk in exc.build_log]
        raise SetupError(f"building {tag} failed: {exc.msg}; last output: {[x for x in lines if x][-3:]}") from None
