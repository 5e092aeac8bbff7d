"""The embedded local cluster's deployer: our own JVMs, their state file (canary.cluster.local)."""

from __future__ import annotations

from pathlib import Path

from canary.broker_metrics import BrokerMetricsSource, ExporterSource
from canary.cluster import distribution
from canary.cluster.local import UNCHANGED, LocalCluster
from canary.kafka.broker_log import fatal_cause_in
from canary.rollout.deployers.base import BrokerInfo, Capability, ControllerInfo


class LocalDeployer:
    """The embedded local cluster (canary.cluster.local) in `directory`."""

    def __init__(self, directory: str | Path):
        self.cluster = LocalCluster.open(Path(directory))

    @property
    def capabilities(self) -> frozenset[Capability]:
        return frozenset({"controllers", "client_delay", "stop_start", "concurrent_rolls"})

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

    def process_running(self, broker_id: int) -> bool | None:
        self.cluster.reload()
        return self.cluster.is_running(self.cluster.state.node(broker_id, "broker"))

    def exit_cause(self, broker_id: int) -> str | None:
        return fatal_cause_in(self.cluster.state.node_dir(self.cluster.state.node(broker_id, "broker")) / "logs")

    def roll_broker(self, broker_id: int, *, version: str, config: dict[str, str], rack: str | None,
                    client_delay_ms: float) -> None:
        # A cluster object of its own per roll: rolls of a batch run at once, each reading and saving the state file
        # under the cluster's lock, none saving a state another thread re-read meanwhile.
        cluster = LocalCluster.open(self.cluster.directory)
        current = cluster.state.node(broker_id, "broker")
        changes: dict[str, str | None] = {k: None for k in current.config if k not in config} | dict(config)
        delay_changed = float(getattr(current, "client_delay_ms", 0.0) or 0.0) != float(client_delay_ms)
        cluster.restart_node(broker_id, version=version, config=changes, rack=rack, wait=False, role="broker",
                                  client_delay_ms=client_delay_ms if delay_changed else UNCHANGED)

    def roll_controller(self, node_id: int, *, version: str) -> None:
        self.cluster.restart_node(node_id, version=version, wait=False, role="controller")

    def stop_broker(self, broker_id: int) -> None:
        self.cluster.state.node(broker_id, "broker")  # a controller's id is refused
        self.cluster.stop_node(broker_id)

    def start_broker(self, broker_id: int) -> None:
        self.cluster.state.node(broker_id, "broker")
        self.cluster.start_node(broker_id, wait=False)

    def broker_metrics(self) -> BrokerMetricsSource | None:
        """The brokers' metrics agents; every broker must have one (a broker started before the agent existed
        has none: restart it)."""
        self.cluster.reload()
        endpoints = self.cluster.metrics_endpoints()
        return ExporterSource(endpoints) if endpoints else None
