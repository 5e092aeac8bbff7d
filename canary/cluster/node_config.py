"""server.properties for each node of a local KRaft cluster.

Defaults suit a small loopback cluster on a 2-core machine (few threads, small buffers);
per-node overrides win, except for the keys this module owns (identity, listeners, storage).
"""

from __future__ import annotations

from canary.cluster.state import LOOPBACK, ClusterState, NodeState
from canary.errors import ClusterError
from canary.kafka import broker_config

# Keys the local cluster sets itself; overriding them would break addressing or storage.
MANAGED_KEYS = frozenset({
    "process.roles", "node.id", "broker.id", "controller.quorum.voters", "controller.quorum.bootstrap.servers",
    "controller.listener.names", "listeners", "advertised.listeners", "listener.security.protocol.map",
    "inter.broker.listener.name", "log.dirs", "log.dir", "metadata.log.dir", "broker.rack",
    # a secured cluster's TLS and SASL settings (canary.cluster.security)
    "sasl.enabled.mechanisms", "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password",
    "ssl.key.password", "ssl.client.auth",
})

SMALL_MACHINE = {
    "num.network.threads": "2",
    "num.io.threads": "4",
    "num.recovery.threads.per.data.dir": "1",
    "background.threads": "4",
    "log.cleaner.threads": "1",
    "log.cleaner.dedupe.buffer.size": str(8 * 1024 * 1024),  # default 128 MiB would eat the capped heap
}


def is_managed(key: str) -> bool:
    """Whether `key` is the local cluster's own (identity, listeners, storage, security): no override may set it."""
    return key in MANAGED_KEYS or key.startswith("listener.name.")


def validate_overrides(config: dict[str, str]) -> None:
    """Refuses overrides of managed keys and malformed keys, before anything is changed."""
    problems = broker_config.config_problems(config)
    if problems:
        raise ClusterError(f"config override refused: {'; '.join(problems)}")
    for key in config:
        if is_managed(key):
            hint = " (use --rack)" if key == "broker.rack" else ""
            raise ClusterError(f"config key {key!r} is managed by the local cluster and cannot be overridden{hint}")


def render(state: ClusterState, node: NodeState, security: dict[str, str] | None = None) -> str:
    """The node's server.properties. `security`: a secured cluster's broker settings
    (canary.cluster.security.broker_properties); its client listener is then CLIENT, on SASL_SSL."""
    props = properties(state, node, security)
    try:
        return "".join(broker_config.properties_line(key, value) for key, value in props.items())
    except ValueError as exc:
        raise ClusterError(f"broker {node.node_id}: {exc}") from None


def properties(state: ClusterState, node: NodeState, security: dict[str, str] | None = None) -> dict[str, str]:
    """The node's settings, in the order server.properties lists them (the container runtime passes them as
    environment variables instead)."""
    if state.security != "plaintext" and node.role == "broker" and not security:
        raise ClusterError(f"broker {node.node_id} of a {state.security} cluster needs its security settings")
    data_dir = state.node_dir(node) / "data"
    props: dict[str, str] = {
        "process.roles": node.role,
        "node.id": str(node.node_id),
        "controller.quorum.voters": state.quorum_voters,
        "controller.listener.names": "CONTROLLER",
        "log.dirs": str(data_dir),
        **SMALL_MACHINE,
    }
    if node.role == "controller":
        props |= {
            "listeners": f"CONTROLLER://{LOOPBACK}:{node.port}",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT",
        }
    else:
        replicas = min(3, len(state.brokers))
        if node.replication_port:
            # Clients on PLAINTEXT, or on CLIENT with SASL_SSL (advertised through the delay proxy when there is one),
            # followers and other brokers on REPLICATION, which is never proxied and stays on loopback.
            client, protocol = ("CLIENT", "SASL_SSL") if security else ("PLAINTEXT", "PLAINTEXT")
            replication = f"REPLICATION://{LOOPBACK}:{node.replication_port}"
            listeners = {
                "listeners": f"{client}://{LOOPBACK}:{node.port},{replication}",
                "advertised.listeners": f"{client}://{LOOPBACK}:{node.advertised_port},{replication}",
                "listener.security.protocol.map": f"CONTROLLER:PLAINTEXT,{client}:{protocol},REPLICATION:PLAINTEXT",
                "inter.broker.listener.name": "REPLICATION",
                **(security or {}),
            }
        else:  # a cluster from a state file that predates the replication listener
            listeners = {
                "listeners": f"PLAINTEXT://{LOOPBACK}:{node.port}",
                "advertised.listeners": f"PLAINTEXT://{LOOPBACK}:{node.port}",
                "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
                "inter.broker.listener.name": "PLAINTEXT",
            }
        props |= {
            **listeners,
            "offsets.topic.replication.factor": str(replicas),
            "transaction.state.log.replication.factor": str(replicas),
            "transaction.state.log.min.isr": str(max(1, replicas - 1)),
            "group.initial.rebalance.delay.ms": "0",
        }
        if node.rack:
            props["broker.rack"] = node.rack
    return props | node.config
