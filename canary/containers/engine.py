"""The Docker engine the containers run on: `DOCKER_HOST` (or the spec's `host`), else the local socket."""

from __future__ import annotations

import os

import docker
from docker.errors import DockerException

from canary.errors import SetupError


class DockerUnavailable(SetupError):
    """No Docker engine answers where we were told to look."""


def connect(host: str | None = None, timeout: float = 60) -> docker.DockerClient:
    """A client of the engine at `host` (None: DOCKER_HOST, else the local socket); raises DockerUnavailable naming
    where it looked and what to do."""
    where = host or os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
    try:
        client = docker.DockerClient(base_url=where, version="auto", timeout=int(timeout)) if host \
            else docker.from_env(version="auto", timeout=int(timeout))
        client.ping()
    except DockerException as exc:
        reason = str(exc).split("(", 1)[0].strip() or type(exc).__name__
        raise DockerUnavailable(f"cannot reach the Docker engine at {where} ({reason}): start it (Debian: `apt install "
                                f"docker.io`, then `dockerd`) or point DOCKER_HOST at one") from None
    return client
