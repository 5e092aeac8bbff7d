"""A KRaft cluster of containers on one Docker engine, host networking on loopback: `kafka-canary cluster up
--runtime docker`. Each node is a container named `<cluster>-<role>-<id>` with a named data volume, labelled with
the cluster, node id, role and version, so the docker deployer finds it and nothing else is ever touched. The nodes'
settings are those of the embedded JVM cluster (canary.cluster.node_config), passed as the official image's
KAFKA_* variables."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import docker
from docker.errors import NotFound

from canary.cluster import layout, node_config
from canary.cluster.distribution import BASELINE_VERSION
from canary.cluster.processes import JVM_OPTS
from canary.cluster.state import ClusterState, NodeState
from canary.containers import env, images, nodes
from canary.containers.spec import ADDRESS, CLUSTER, CREATED, METRICS_PORT, NODE_ID, ROLE, VERSION, ContainerSpec
from canary.errors import ClusterError, ClusterStateError
from canary.kafka import health
from canary.kafka.wait import wait_until

DATA = "/var/lib/kafka/data"


@dataclass(frozen=True)
class DockerCluster:
    name: str
    bootstrap_servers: str

    @classmethod
    def up(cls, client: docker.DockerClient, name: str, brokers: int = 3, controllers: int = 1,
           version: str = BASELINE_VERSION, image_template: str | None = None, config: dict[str, str] | None = None,
           timeout: float = 180.0) -> DockerCluster:
        """Creates and starts the cluster, then waits until it is healthy. Refuses a name in use (ours or not)
        before anything is created; a cluster that never gets healthy is removed again."""
        layout.check_request(brokers, controllers, {}, None, config or {}, "plaintext")
        state = layout.new_state(Path("/"), brokers, controllers, version, {}, None, config or {}, None, "plaintext")
        metrics_ports = layout.free_ports(brokers, avoid=layout.node_ports(state))
        specs = []
        image = images.ensure(client, version, image_template)
        agent = images.has_metrics_agent(client, image)
        for i, node in enumerate(state.nodes):
            specs.append(_node_spec(name, state, node, image, metrics_ports[i - controllers]
                                    if agent and node.role == "broker" else None))
        _refuse_taken(client, name, [s.name for s in specs])
        try:
            for spec in specs:
                client.volumes.create(f"{spec.name}-data", labels={CLUSTER: name, CREATED: "kafka-canary"})
                spec.create(client).start()
            cluster = cls(name, ",".join(n.address for n in state.brokers))
            wait_until(f"cluster {name} healthy", timeout, lambda: cluster._unhealthy(state), None)
        except BaseException:
            nodes.remove(client, name)
            raise
        return cluster

    def _unhealthy(self, state: ClusterState) -> str | None:
        seen = health.check(self.bootstrap_servers, [b.node_id for b in state.brokers],
                            expected_voters=[c.node_id for c in state.controllers])
        return None if seen.healthy else seen.reason()

    @staticmethod
    def down(client: docker.DockerClient, name: str) -> list[str]:
        """Removes the cluster's containers and volumes (only those kafka-canary created)."""
        return nodes.remove(client, name)


def _node_spec(cluster: str, state: ClusterState, node: NodeState, image: str, metrics_port: int | None
               ) -> ContainerSpec:
    props = node_config.properties(state, node) | {"log.dirs": DATA}
    heap = state.broker_heap if node.role == "broker" else state.controller_heap
    environment = {env.variable(k): v for k, v in props.items()} | {
        "CLUSTER_ID": state.cluster_id, "KAFKA_HEAP_OPTS": f"-Xms{heap} -Xmx{heap}",
        "KAFKA_JVM_PERFORMANCE_OPTS": " ".join(JVM_OPTS)}
    labels = {CLUSTER: cluster, NODE_ID: str(node.node_id), ROLE: node.role, VERSION: node.version,
              CREATED: "kafka-canary"}
    if node.role == "broker":
        labels[ADDRESS] = node.address
    if metrics_port:
        agent = f"{images.METRICS_AGENT}=127.0.0.1:{metrics_port}:{images.METRICS_CONFIG}"
        environment["KAFKA_OPTS"] = f"-javaagent:{agent}"
        labels[METRICS_PORT] = str(metrics_port)
    name = f"{cluster}-{node.role}-{node.node_id}"
    return ContainerSpec(name=name, image=image, environment=environment, labels=labels,
                         mounts=[{"type": "volume", "source": f"{name}-data", "target": DATA, "read_only": False}],
                         healthcheck=_listening(node.port))


def _listening(port: int) -> dict:
    """A health check that the node's listener accepts connections (bash, as in the official image)."""
    second = 1_000_000_000
    return {"Test": ["CMD", "bash", "-c", f"exec 3<>/dev/tcp/127.0.0.1/{port}"], "Interval": 10 * second,
            "Timeout": 5 * second, "Retries": 6, "StartPeriod": 30 * second}


def _refuse_taken(client: docker.DockerClient, cluster: str, names: list[str]) -> None:
    if nodes.find(client, cluster):
        raise ClusterStateError(f"a cluster named {cluster!r} already runs on this Docker engine; use it, or remove it "
                                f"with `kafka-canary cluster down --runtime docker --name {cluster}`")
    for name in names:
        for what, get in (("container", client.containers.get), ("volume", client.volumes.get)):
            try:
                get(name if what == "container" else f"{name}-data")
            except NotFound:
                continue
            raise ClusterError(f"a {what} named {name if what == 'container' else name + '-data'!r} already exists and "
                               f"is not part of a kafka-canary cluster; it was left alone: choose another --name")


def validate_name(name: str) -> str:
    if not name or not all(ch.isalnum() or ch in "-_" for ch in name) or not name[0].isalnum():
        raise ClusterError(f"cluster name {name!r}: use letters, digits, - and _ (starting with a letter or digit)")
    return name
