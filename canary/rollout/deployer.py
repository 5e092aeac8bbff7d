"""Deployers put a broker on a version and config. The rollout steps only talk to the `Deployer` interface
(canary.rollout.deployers.base); `open_deployer` picks the one a spec's cluster section names: `local` drives the
embedded cluster of JVMs, `docker` containers on a Docker engine."""

from __future__ import annotations

from canary.rollout.deployers.base import BrokerInfo, ControllerInfo, Deployer, DockerSettings
from canary.rollout.deployers.local import LocalDeployer

__all__ = ["BrokerInfo", "ControllerInfo", "Deployer", "DockerSettings", "LocalDeployer", "open_deployer"]


def open_deployer(kind: str, directory: str = "", docker: DockerSettings | None = None,
                  bootstrap_servers: str | None = None, client_config: dict[str, str] | None = None) -> Deployer:
    """The deployer a spec's cluster section names (its fields as validated there)."""
    if kind == "docker":
        from canary.rollout.deployers.docker import DockerDeployer

        if docker is None:
            raise ValueError("the docker deployer needs cluster.docker (at least its name)")
        return DockerDeployer(docker, bootstrap_servers, client_config)
    if kind == "local":
        return LocalDeployer(directory)
    raise ValueError(f"unknown deployer {kind!r}")
