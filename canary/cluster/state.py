"""The state file of a local cluster: what every node is meant to be, and the process running it.

The file (`<dir>/cluster.json`) lets any process find a cluster another process started, so
`status` and `down` work from a second shell. Writes are atomic (temporary file + rename).
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal

from canary.errors import ClusterStateError, UnknownNodeError

STATE_FILE = "cluster.json"
SCHEMA = 1
LOOPBACK = "127.0.0.1"

Role = Literal["broker", "controller"]


@dataclass
class NodeState:
    node_id: int
    role: Role
    version: str
    port: int
    rack: str | None = None
    config: dict[str, str] = field(default_factory=dict)
    pid: int | None = None
    pid_start: int | None = None  # process start time (/proc), so a reused pid is never mistaken for ours
    desired: Literal["running", "stopped"] = "running"
    # Brokers: the inter-broker (replication) listener, apart from the client listener on `port`, so
    # a delay proxy in front of the client listener never slows replication. None in state files
    # written before it existed: such a broker replicates over its client listener.
    replication_port: int | None = None
    # Fault injection: with a delay > 0 a proxy (its own process) listens on `proxy_port`, delays
    # client->broker bytes, and the broker advertises the proxy's port to clients.
    client_delay_ms: float = 0.0
    proxy_port: int | None = None
    proxy_pid: int | None = None
    proxy_pid_start: int | None = None
    # Brokers: the JMX exporter agent's port (/metrics on loopback, canary.cluster.metrics_agent); None in state
    # files written before it existed.
    metrics_port: int | None = None

    @property
    def address(self) -> str:
        """The broker's own client listener (bootstrap servers point here, never at a proxy)."""
        return f"{LOOPBACK}:{self.port}"

    @property
    def advertised_port(self) -> int:
        """The client port the broker advertises in metadata: the delay proxy's while there is one."""
        return self.proxy_port if self.client_delay_ms > 0 and self.proxy_port else self.port


@dataclass
class ClusterState:
    cluster_id: str
    directory: str
    format_release: str  # the release the metadata log was formatted with, e.g. "3.9"
    broker_heap: str
    controller_heap: str
    nodes: list[NodeState]
    schema: int = SCHEMA
    # "plaintext", or "sasl_ssl": the client listener takes SASL_SSL with SCRAM-SHA-512 (canary.cluster.security).
    # The client settings without the password are in `client_config`, the password in `secrets_file` (0600).
    security: str = "plaintext"
    client_config: str | None = None
    secrets_file: str | None = None
    # Seconds a restarted node stays down before it starts: a rehearsal of a production broker's restart, whose log
    # recovery takes minutes (bench/promote_batches.py); 0 on a cluster started normally.
    start_delay_s: float = 0.0

    def node(self, node_id: int, role: Role | None = None) -> NodeState:
        for node in self.nodes:
            if node.node_id == node_id and (role is None or node.role == role):
                return node
        known = ", ".join(str(n.node_id) for n in self.nodes if role is None or n.role == role)
        raise UnknownNodeError(f"the cluster in {self.directory} has no {role or 'node'} with id {node_id}; "
                               f"its {role or 'node'} ids are {known}")

    @property
    def brokers(self) -> list[NodeState]:
        return [n for n in self.nodes if n.role == "broker"]

    @property
    def controllers(self) -> list[NodeState]:
        return [n for n in self.nodes if n.role == "controller"]

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(n.address for n in self.brokers)

    @property
    def quorum_voters(self) -> str:
        return ",".join(f"{n.node_id}@{n.address}" for n in self.controllers)

    def node_dir(self, node: NodeState) -> Path:
        return Path(self.directory) / "nodes" / str(node.node_id)

    def save(self) -> None:
        path = Path(self.directory) / STATE_FILE
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(asdict(self), indent=2) + "\n")
        os.replace(tmp, path)

    @classmethod
    def load(cls, directory: Path) -> ClusterState:
        path = Path(directory) / STATE_FILE
        if not path.exists():
            raise ClusterStateError(f"no cluster in {directory} (no {STATE_FILE}); start one with "
                                    f"`kafka-canary cluster up --dir {directory}`")
        raw = json.loads(path.read_text())
        if raw.get("schema") != SCHEMA:
            raise ClusterStateError(f"{path} has schema {raw.get('schema')}, this version reads {SCHEMA}; "
                                    f"stop that cluster with the kafka-canary that started it")
        raw["nodes"] = [NodeState(**n) for n in raw["nodes"]]
        return cls(**raw)

    @staticmethod
    def exists(directory: Path) -> bool:
        return (Path(directory) / STATE_FILE).exists()
