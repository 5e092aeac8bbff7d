"""Deployers put a broker on a version and config. The rollout steps only talk to this interface, so a
Kubernetes/Strimzi deployer can be added without touching them; `LocalDeployer` drives the embedded cluster."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from canary.broker_metrics import BrokerMetricsSource, ExporterSource
from canary.cluster import distribution
from canary.cluster.local import UNCHANGED, LocalCluster


@dataclass(frozen=True)
class BrokerInfo:
    broker_id: int
    version: str
    config: dict[str, str]          # the broker's config overrides
    rack: str | None                # broker.rack as deployed (the canary marker travels here)
    running: bool
    client_delay_ms: float = 0.0    # an injected fault in front of its client listener (0: none)

    def to_dict(self) -> dict:
        return {"id": self.broker_id, "version": self.version, "config": dict(sorted(self.config.items())),
                "rack": self.rack, "client_delay_ms": self.client_delay_ms}


@dataclass(frozen=True)
class ControllerInfo:
    node_id: int
    version: str
    running: bool

    def to_dict(self) -> dict:
        return {"id": self.node_id, "version": self.version}


class Deployer(Protocol):
    """What the rollout needs from whatever runs the brokers."""

    @property
    def bootstrap_servers(self) -> str: ...

    def brokers(self) -> list[BrokerInfo]: ...

    def controllers(self) -> list[ControllerInfo]: ...

    def prepare(self, version: str) -> None:
        """Makes `version` deployable (fetches it) or raises; called before any change."""

    def roll_broker(self, broker_id: int, *, version: str, config: dict[str, str], rack: str | None,
                    client_delay_ms: float) -> None:
        """Controlled shutdown of one broker, then start it with exactly this version, config overrides and
        rack. Returns once the process runs; registration and ISR are the caller's to wait for."""

    def roll_controller(self, node_id: int, *, version: str) -> None:
        """Restarts one controller on `version`; returns once it runs."""

    def broker_metrics(self) -> BrokerMetricsSource | None:
        """The brokers' own metrics as the deployer can read them, or None when it cannot."""


class LocalDeployer:
    """The embedded local cluster (canary.cluster.local) in `directory`."""

    def __init__(self, directory: str | Path):
        self.cluster = LocalCluster.open(Path(directory))

    @property
    def bootstrap_servers(self) -> str:
        return self.cluster.bootstrap_servers

    def brokers(self) -> list[BrokerInfo]:
        self.cluster.reload()
        return [BrokerInfo(n.node_id, n.version, dict(n.config), n.rack, self.cluster.is_running(n),
                           float(getattr(n, "client_delay_ms", 0.0) or 0.0)) for n in self.cluster.state.brokers]

    def controllers(self) -> list[ControllerInfo]:
        self.cluster.reload()
        return [ControllerInfo(n.node_id, n.version, self.cluster.is_running(n))
                for n in self.cluster.state.controllers]

    def prepare(self, version: str) -> None:
        distribution.ensure(version)

    def roll_broker(self, broker_id: int, *, version: str, config: dict[str, str], rack: str | None,
                    client_delay_ms: float) -> None:
        current = self.cluster.state.node(broker_id, "broker")
        changes: dict[str, str | None] = {k: None for k in current.config if k not in config} | dict(config)
        delay_changed = float(getattr(current, "client_delay_ms", 0.0) or 0.0) != float(client_delay_ms)
        self.cluster.restart_node(broker_id, version=version, config=changes, rack=rack, wait=False, role="broker",
                                  client_delay_ms=client_delay_ms if delay_changed else UNCHANGED)

    def roll_controller(self, node_id: int, *, version: str) -> None:
        self.cluster.restart_node(node_id, version=version, wait=False, role="controller")

    def broker_metrics(self) -> BrokerMetricsSource | None:
        """The brokers' metrics agents; every broker must have one (a broker started before the agent existed
        has none: restart it)."""
        self.cluster.reload()
        endpoints = self.cluster.metrics_endpoints()
        return ExporterSource(endpoints) if endpoints else None


def open_deployer(kind: str, directory: str) -> Deployer:
    if kind == "local":
        return LocalDeployer(directory)
    raise ValueError(f"unknown deployer {kind!r}")
