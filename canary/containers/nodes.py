"""Finding a cluster's node containers by their labels, and replacing one node's container by another spec: a
graceful stop (SIGTERM: Kafka's controlled shutdown, killed only after the stop timeout), the old container kept
aside until the new one runs, and put back as it was when the new one cannot be created or exits at start."""

from __future__ import annotations

import re
import time

import docker
from docker.errors import APIError, ImageNotFound, NotFound
from docker.models.containers import Container

from canary import process
from canary.containers import env
from canary.containers.spec import CLUSTER, NODE_ID, PREVIOUS, ROLE, ContainerSpec
from canary.errors import ClusterError
from canary.kafka.broker_log import fatal_cause


class NodeStartError(ClusterError):
    """A node's new container could not be created or did not stay up; its previous container was put back."""


ASIDE = "-replaced-"  # a replaced container's name while its successor starts: <name>-replaced-<unix time>


def find(client: docker.DockerClient, cluster: str) -> dict[tuple[str, int], Container]:
    """(role, node id) → container, for every container labelled as a node of `cluster`: the node's own container,
    or, where a crash in the middle of `replace` left only the replaced one aside, that one."""
    found: dict[tuple[str, int], Container] = {}
    for c in _labelled(client, cluster):
        role, node_id = c.labels.get(ROLE), c.labels.get(NODE_ID, "")
        if role in ("broker", "controller") and node_id.isdigit():
            key = (role, int(node_id))
            if key not in found or ASIDE in found[key].name:
                found[key] = c
    return found


def recover(client: docker.DockerClient, cluster: str) -> list[str]:
    """Finishes what a crash in the middle of `replace` left: a replaced container aside with no successor runs
    again under its own name (the node as it was before); one whose successor exists is removed. Returns what it
    did, one line each."""
    done = []
    containers = _labelled(client, cluster)
    names = {c.name for c in containers}
    for c in sorted(containers, key=lambda c: c.name, reverse=True):  # the newest aside first
        if ASIDE not in c.name:
            continue
        own = c.name.rsplit(ASIDE, 1)[0]
        if own in names:
            c.remove(v=False)
            done.append(f"removed {c.name}: {own} had replaced it")
        else:
            _restore(c, own)
            names.add(own)
            done.append(f"{c.name} runs again as {own}: its replacement never started")
    return done


def _labelled(client: docker.DockerClient, cluster: str) -> list[Container]:
    return client.containers.list(all=True, filters={"label": f"{CLUSTER}={cluster}"})


def spec_of(client: docker.DockerClient, container: Container) -> ContainerSpec:
    try:
        image_env = client.images.get(container.attrs["Config"]["Image"]).attrs["Config"].get("Env") or []
    except ImageNotFound:
        image_env = []
    return ContainerSpec.of(container, image_env)


def previous_spec(container: Container) -> ContainerSpec | None:
    """The spec this container replaced, kept in its label by `replace`."""
    text = container.labels.get(PREVIOUS)
    return ContainerSpec.from_json(text) if text else None


def listener_port(spec: ContainerSpec) -> int | None:
    """The node's first listener port, when the container shares the host's network (so it can be checked)."""
    if spec.network_mode != "host":
        return None
    match = re.search(r"://[^:,]*:(\d+)", spec.environment.get(env.variable("listeners"), ""))
    return int(match[1]) if match else None


def replace(client: docker.DockerClient, container: Container, new: ContainerSpec, stop_timeout: float,
            start_timeout: float) -> Container:
    """Stops `container` gracefully and runs `new` in its place (same name, same volumes); returns the new one
    once it serves its listener (or, off the host network, stayed up a few seconds). Raises NodeStartError,
    with the old container running again, when the new one cannot be created or exits."""
    old = spec_of(client, container)
    if container.status == "running":
        container.stop(timeout=int(stop_timeout))
    aside = f"{old.name}{ASIDE}{int(time.time())}"
    container.rename(aside)
    try:
        created = new.create(client)
    except (APIError, ImageNotFound) as exc:
        _restore(container, old.name)
        raise NodeStartError(f"{old.name}: the new container could not be created ({_explain(exc)}); the previous "
                             f"container runs again") from None
    try:
        created.start()
        _wait_serving(created, listener_port(new), start_timeout)
    except NodeStartError as exc:
        created.remove(force=True)
        _restore(container, old.name)
        raise NodeStartError(f"{exc}; the previous container runs again") from None
    except APIError as exc:
        created.remove(force=True)
        _restore(container, old.name)
        raise NodeStartError(f"{old.name}: the new container did not start ({_explain(exc)}); the previous "
                             f"container runs again") from None
    container.remove(v=False)  # its volumes stay: the new container uses them
    return created


def start(container: Container, port: int | None, timeout: float) -> None:
    """Starts a stopped node container; returns once it serves `port` (or stayed up a few seconds), raises
    NodeStartError when it exits."""
    container.start()
    _wait_serving(container, port, timeout)


def restart(container: Container, port: int | None, stop_timeout: float, start_timeout: float) -> None:
    """Stops a running node container gracefully and starts it again as it is; returns once it serves `port` (or
    stayed up a few seconds), raises NodeStartError when it exits."""
    container.stop(timeout=int(stop_timeout))
    start(container, port, start_timeout)


def _restore(container: Container, name: str) -> None:
    container.rename(name)
    container.start()


def _explain(exc: Exception) -> str:
    return str(getattr(exc, "explanation", None) or exc).splitlines()[0][:300]


def _wait_serving(container: Container, port: int | None, timeout: float) -> None:
    deadline = time.monotonic() + (timeout if port else min(timeout, 5.0))
    while time.monotonic() < deadline:
        container.reload()
        if container.status in ("exited", "dead"):
            code = container.attrs["State"].get("ExitCode")
            tail = container.logs(tail=60).decode(errors="replace").strip().splitlines()
            hint = fatal_cause(tail) or (tail or ["no output"])[0]
            raise NodeStartError(f"{container.name} exited at start (exit code {code}): {hint[:400]}")
        if port and process.accepts_connections(port, timeout=0.5):
            return
        time.sleep(0.3)
    if port:
        raise NodeStartError(f"{container.name} did not open port {port} within {timeout:.0f}s")


def remove(client: docker.DockerClient, cluster: str, only_ours: bool = True) -> list[str]:
    """Removes the cluster's node containers and their named data volumes (those we created: labelled so)."""
    removed = []
    for c in _labelled(client, cluster):  # a replaced container left aside by a crash too
        if only_ours and not c.labels.get("io.kafka-canary.created-by"):
            continue
        volumes = [m["Name"] for m in c.attrs.get("Mounts") or [] if m["Type"] == "volume"]
        c.remove(force=True)
        removed.append(c.name)
        for name in volumes:
            try:
                volume = client.volumes.get(name)
                if volume.attrs.get("Labels", {}).get(CLUSTER) == cluster:
                    volume.remove(force=True)
            except NotFound:
                pass
    return removed
