"""What a local cluster is doing, as `kafka-canary cluster status` shows it: each node's process and
state, its delay proxy, and the cluster's health."""

from __future__ import annotations

import time
from dataclasses import dataclass

from canary import process
from canary.cluster import security as cluster_security
from canary.cluster.processes import NodeProcesses
from canary.cluster.state import ClusterState, NodeState, Role
from canary.errors import HealthTimeout
from canary.kafka import health
from canary.kafka.broker_log import fatal_cause_in


@dataclass(frozen=True)
class NodeStatus:
    node_id: int
    role: Role
    version: str
    rack: str | None
    pid: int | None
    port: int
    state: str  # online | starting | down | stopped
    config: dict[str, str]
    client_delay_ms: float = 0.0  # injected by a delay proxy in front of the client listener
    proxy_port: int | None = None  # the port advertised to clients while a delay is set
    proxy: str | None = None  # running | down while a delay is set (down: clients cannot reach the broker)

    def to_dict(self) -> dict:
        return {"id": self.node_id, "role": self.role, "version": self.version, "rack": self.rack,
                "pid": self.pid, "port": self.port, "state": self.state, "config": self.config,
                "client_delay_ms": self.client_delay_ms, "proxy_port": self.proxy_port, "proxy": self.proxy}


@dataclass(frozen=True)
class ClusterStatus:
    directory: str
    cluster_id: str
    bootstrap_servers: str
    nodes: list[NodeStatus]
    health: health.ClusterHealth
    security: str = cluster_security.PLAINTEXT
    client: dict[str, str] | None = None  # the client settings without the password
    secrets_file: str | None = None       # where the password is (0600)

    def to_dict(self) -> dict:
        return {"directory": self.directory, "cluster_id": self.cluster_id,
                "bootstrap_servers": self.bootstrap_servers, "security": self.security, "client": self.client or {},
                "secrets_file": self.secrets_file, "healthy": self.health.healthy,
                "health": self.health.to_dict(), "nodes": [n.to_dict() for n in self.nodes]}


def node_status(node: NodeState, seen: health.ClusterHealth, processes: NodeProcesses) -> NodeStatus:
    """The node as `seen` by the cluster: online once a broker is registered (a controller: accepts
    connections), starting before that; down if its process died, stopped if it was stopped on purpose."""
    if processes.running(node):
        if node.role == "broker":
            state = "online" if node.node_id in seen.registered_brokers else "starting"
        else:
            state = "online" if process.accepts_connections(node.port) else "starting"
    else:
        state = "stopped" if node.desired == "stopped" else "down"
    proxy = None
    if node.client_delay_ms > 0:
        proxy = "running" if processes.proxy_running(node) else "down"
    return NodeStatus(node.node_id, node.role, node.version, node.rack,
                      node.pid if state not in ("down", "stopped") else None, node.port, state,
                      dict(node.config), node.client_delay_ms,
                      node.proxy_port if node.client_delay_ms > 0 else None, proxy)


def cluster_health(state: ClusterState, client_config: dict[str, str], timeout: float = 5.0) -> health.ClusterHealth:
    # A stopped broker counts: the cluster is degraded until it is back.
    brokers = [n.node_id for n in state.brokers]
    voters = [n.node_id for n in state.controllers]
    return health.check(state.bootstrap_servers, brokers, timeout=timeout, expected_voters=voters,
                        client_config=client_config)


def wait_healthy(state: ClusterState, processes: NodeProcesses, client_config: dict[str, str],
                 timeout: float = 120.0) -> health.ClusterHealth:
    """Waits until every broker is registered, no partition is offline or under-replicated and
    every controller has caught up with the quorum.

    Raises HealthTimeout naming what is still wrong, and any node process that died.
    """
    deadline = time.monotonic() + timeout
    while True:
        seen = cluster_health(state, client_config)
        if seen.healthy:
            return seen
        dead = [n.node_id for n in state.nodes if n.desired == "running" and not processes.running(n)]
        # A delayed broker whose proxy died is unreachable for clients although it looks registered.
        dead += [n.node_id for n in state.brokers if n.desired == "running" and n.client_delay_ms > 0
                 and n.node_id not in dead and not processes.proxy_running(n)]
        if dead:
            logs = [state.node_dir(state.node(i)) / "logs" for i in dead]
            said = "".join(f"; node {i} says: {cause}" for i, log in zip(dead, logs, strict=True)
                           if (cause := fatal_cause_in(log)))
            raise HealthTimeout(f"cluster in {state.directory}: nodes {dead} (or their delay proxies) exited"
                                f"{said} (logs in {', '.join(map(str, logs))})")
        if time.monotonic() > deadline:
            raise HealthTimeout(f"cluster in {state.directory} not healthy after {timeout:.0f}s: {seen.reason()}")
        time.sleep(0.5)
