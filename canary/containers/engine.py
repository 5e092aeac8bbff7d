"""The Docker engine the containers run on: `DOCKER_HOST` (or the spec's `host`), else the local socket."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import Any, TypeVar

import docker
import requests
from docker.errors import DockerException

from canary.errors import InfrastructureError, SetupError


class DockerUnavailable(SetupError, InfrastructureError):
    """No Docker engine answers where we were told to look."""


class EngineUnreachable(InfrastructureError):
    """The Docker engine stopped answering in the middle of an operation: the road to the nodes, not the change."""


def where(host: str | None = None) -> str:
    """The engine a client of `host` talks to (None: DOCKER_HOST, else the local socket)."""
    return host or os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"


Method = TypeVar("Method", bound=Callable[..., Any])


def answering(method: Method) -> Method:
    """A method of an object with `engine_at` whose engine stops answering (the connection refused or dropped, a
    read timed out) raises EngineUnreachable, so a rollout ends UNFINISHED rather than ROLLBACK (canary.outcome)."""
    @functools.wraps(method)
    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except (requests.exceptions.ConnectionError, requests.exceptions.Timeout) as exc:
            reason = str(exc).split("(", 1)[0].strip() or type(exc).__name__
            raise EngineUnreachable(f"the Docker engine at {self.engine_at} stopped answering during "
                                    f"{method.__name__} ({reason}): start it again or check the road to it, then run "
                                    f"the step again") from None
    return call  # type: ignore[return-value]


def connect(host: str | None = None, timeout: float = 60) -> docker.DockerClient:
    """A client of the engine at `host` (None: DOCKER_HOST, else the local socket); raises DockerUnavailable naming
    where it looked and what to do."""
    at = where(host)
    try:
        client = docker.DockerClient(base_url=at, version="auto", timeout=int(timeout)) if host \
            else docker.from_env(version="auto", timeout=int(timeout))
        client.ping()
    except DockerException as exc:
        reason = str(exc).split("(", 1)[0].strip() or type(exc).__name__
        raise DockerUnavailable(f"cannot reach the Docker engine at {at} ({reason}): start it (Debian: `apt install "
                                f"docker.io`, then `dockerd`) or point DOCKER_HOST at one") from None
    return client
