"""Deployers put a broker on a version and config. The rollout steps only talk to the `Deployer` interface
(canary.rollout.deployers.base); `open_deployer` picks the one a spec's cluster section names: `local` drives the
embedded cluster of JVMs, `docker` containers on a Docker engine, `command` any fleet through shell command templates
(systemd over SSH, Ansible, a platform team's own tooling)."""

from __future__ import annotations

from canary.rollout.deployers.base import (
    BrokerInfo,
    Capability,
    CommandSettings,
    ControllerInfo,
    Deployer,
    DockerSettings,
    Reporting,
)
from canary.rollout.deployers.local import LocalDeployer

__all__ = ["BrokerInfo", "Capability", "CommandSettings", "ControllerInfo", "Deployer", "DockerSettings",
           "LocalDeployer", "Reporting", "open_deployer"]


def open_deployer(kind: str, directory: str = "", docker: DockerSettings | None = None,
                  bootstrap_servers: str | None = None, client_config: dict[str, str] | None = None,
                  command: CommandSettings | None = None) -> Deployer:
    """The deployer a spec's cluster section names (its fields as validated there)."""
    if kind == "command":
        from canary.rollout.deployers.command import CommandDeployer

        if command is None or not bootstrap_servers:
            raise ValueError("the command deployer needs cluster.command and cluster.bootstrap_servers")
        return CommandDeployer(command, bootstrap_servers, client_config)
    if kind == "docker":
        from canary.rollout.deployers.docker import DockerDeployer

        if docker is None:
            raise ValueError("the docker deployer needs cluster.docker (at least its name)")
        return DockerDeployer(docker, bootstrap_servers, client_config)
    if kind == "local":
        return LocalDeployer(directory)
    raise ValueError(f"unknown deployer {kind!r}")
