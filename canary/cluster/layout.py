"""A new local cluster's layout: its nodes (ids, roles, versions, racks, ports) and state, checked
before anything is fetched, written or started.

Controllers come first, with ids from CONTROLLER_ID_BASE; brokers have ids 1..N. Every node gets a
port, every broker a second one for its replication listener.
"""

from __future__ import annotations

import base64
import socket
import uuid
from pathlib import Path

from canary import process
from canary.cluster import distribution, node_config
from canary.cluster import security as cluster_security
from canary.cluster.state import LOOPBACK, ClusterState, NodeState
from canary.errors import ClusterError

CONTROLLER_ID_BASE = 3000  # broker ids are 1..N; controller ids stay clear of them
BROKER_HEAP = "320m"
CONTROLLER_HEAP = "192m"


def check_request(brokers: int, controllers: int, broker_versions: dict[int, str], racks: list[str] | None,
                  config: dict[str, str], security: str) -> None:
    """Raises ClusterError for a cluster that cannot be laid out: security mode, sizes, versions, config, racks."""
    cluster_security.check_mode(security)
    if brokers < 1:
        raise ClusterError(f"--brokers must be at least 1, got {brokers}")
    if controllers not in (1, 3, 5):
        raise ClusterError(f"--controllers must be 1, 3 or 5 (a quorum needs an odd size), got {controllers}")
    unknown = sorted(set(broker_versions) - set(range(1, brokers + 1)))
    if unknown:
        raise ClusterError(f"per-broker versions name brokers {unknown}, but broker ids are 1..{brokers}")
    node_config.validate_overrides(config)
    if racks is not None and (not racks or any(not rack.strip() for rack in racks)):
        raise ClusterError("--racks needs non-empty rack names, e.g. --racks a,b,c")


def new_state(directory: Path, brokers: int, controllers: int, version: str, broker_versions: dict[int, str],
              racks: list[str] | None, config: dict[str, str], base_port: int | None, security: str) -> ClusterState:
    """The state of a new cluster (not saved yet). Ports from `base_port` on, or free ones the kernel picks.

    Raises PortInUseError when a port is taken.
    """
    count = controllers + brokers
    # One port per node, then one replication listener per broker.
    wanted = count + brokers
    ports = list(range(base_port, base_port + wanted)) if base_port else free_ports(wanted)
    for port in ports:
        process.require_free(port, "a node of the new cluster")
    nodes = [NodeState(CONTROLLER_ID_BASE + i, "controller", version, ports[i]) for i in range(controllers)]
    for i in range(brokers):
        broker_id = i + 1
        nodes.append(NodeState(broker_id, "broker", broker_versions.get(broker_id, version),
                               ports[controllers + i], rack=racks[i % len(racks)] if racks else None,
                               config=dict(config), replication_port=ports[count + i]))
    oldest = min({version, *broker_versions.values()}, key=distribution.parse_version)
    return ClusterState(cluster_id=_new_cluster_id(), directory=str(directory),
                        format_release=distribution.release_of(oldest), broker_heap=BROKER_HEAP,
                        controller_heap=CONTROLLER_HEAP, nodes=nodes, security=security)


def new_broker(state: ClusterState, version: str, rack: str | None, config: dict[str, str]) -> NodeState:
    """A broker to add to the cluster (not added yet): the next free id, new ports."""
    node_id = max((n.node_id for n in state.brokers), default=0) + 1
    port, second_port = free_ports(2)
    # Replication goes over the listener the other brokers use: the separate one when they have it.
    replication_port = second_port if all(b.replication_port for b in state.brokers) else None
    return NodeState(node_id, "broker", version, port, rack=rack, config=dict(config),
                     replication_port=replication_port)


def free_ports(count: int, avoid: set[int] | frozenset[int] = frozenset()) -> list[int]:
    """`count` different ports free on loopback now, none of `avoid` (ports a cluster's nodes are about to bind: the
    kernel may hand a port out again as soon as it is free)."""
    # Held open together, so the kernel hands out different ports.
    socks: list[socket.socket] = []
    try:
        while len([s for s in socks if s.getsockname()[1] not in avoid]) < count:
            sock = socket.socket()
            sock.bind((LOOPBACK, 0))
            socks.append(sock)
        return [port for s in socks if (port := s.getsockname()[1]) not in avoid]
    finally:
        for sock in socks:
            sock.close()


def node_ports(state: ClusterState) -> set[int]:
    """Every port the cluster's nodes listen on or are given (client, replication, proxy, metrics)."""
    return {port for n in state.nodes for port in (n.port, n.replication_port, n.proxy_port, n.metrics_port) if port}


def _new_cluster_id() -> str:
    # Like Kafka's Uuid.randomUuid: never starting with "-", which the storage tool would read as an option.
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id
