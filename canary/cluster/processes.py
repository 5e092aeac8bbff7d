"""The processes of a local cluster: each node's JVM and, in front of a broker with a client delay, its
delay proxy (`canary.faults.proxy`, a process of its own).

A process is only signalled when it is provably ours (canary.process: same pid, same start time, the
node's marker on its command line). Every start and stop is written to the state file at once, so the
file stays true to what is running.
"""

from __future__ import annotations

from pathlib import Path

from canary import process
from canary.cluster import layout, metrics_agent
from canary.cluster.distribution import KafkaDistribution
from canary.cluster.state import ClusterState, NodeState
from canary.errors import ClusterError
from canary.faults import proxy as delay_proxy

# C1 only (TieredStopAtLevel=1): C2 compiling spent ~40 % of a fresh broker's CPU in its first minute on two
# cores, and a just-restarted (canary) broker ran slower than its warm peers until it was done. Measured on a
# fresh 3-broker cluster, 1,000 msg/s acks=all: first 30 s p50 12 ms (C2: 93 ms), broker CPU over the first
# minute 26 s (C2: 34 s); the probe's peak rate is the same (~7,500 msg/s, the probe process is the limit).
JVM_OPTS = ["-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-XX:MaxMetaspaceSize=96m", "-XX:ReservedCodeCacheSize=64m",
             "-XX:MaxDirectMemorySize=64m", "-Xss512k", "-Djava.awt.headless=true", "-Xshare:auto"]


def _port_free(port: int) -> bool:
    try:
        process.require_free(port, "delay proxy")
    except ClusterError:
        return False
    return True


class NodeProcesses:
    """Starts, checks and stops the node JVMs and delay proxies of the cluster in `directory`.

    `tie_to_parent`: the kernel kills what is started here if the starting process dies (tests set it).
    """

    def __init__(self, directory: Path, tie_to_parent: bool = False):
        self.directory = directory
        self.tie_to_parent = tie_to_parent

    def running(self, node: NodeState) -> bool:
        """Whether the node's JVM is up (it may not serve yet)."""
        return process.is_ours(node.pid, node.pid_start, self._marker(node))

    def proxy_running(self, node: NodeState) -> bool:
        return process.is_ours(node.proxy_pid, node.proxy_pid_start, self._proxy_marker(node))

    def start(self, state: ClusterState, node: NodeState, dist: KafkaDistribution, properties: Path) -> None:
        """Starts the node's JVM on `dist` with its server.properties; the node is then meant to run."""
        logs = state.node_dir(node) / "logs"
        heap = state.broker_heap if node.role == "broker" else state.controller_heap
        jvm = [f"-Xms{heap}", f"-Xmx{heap}", *JVM_OPTS, f"-Dkafka.logs.dir={logs}", self._marker(node)]
        if node.role == "broker":
            jvm.append(metrics_agent.agent_option(self._metrics_port(state, node)))
        cmd = dist.java_command("kafka.Kafka", [str(properties)], jvm, tool=False)
        node.pid, node.pid_start = process.start(cmd, state.node_dir(node), logs / "stdout.log", self.tie_to_parent)
        node.desired = "running"
        state.save()

    @staticmethod
    def _metrics_port(state: ClusterState, node: NodeState) -> int:
        """The broker's metrics port: the one it had when still free (a scraper keeps its target), else a new one that
        no other node of the cluster is given (a node started after this one binds its ports later)."""
        if not node.metrics_port or not _port_free(node.metrics_port):
            node.metrics_port = layout.free_ports(1, avoid=layout.node_ports(state))[0]
        return node.metrics_port

    def start_proxy(self, state: ClusterState, node: NodeState) -> None:
        """Starts the delay proxy in front of the broker's client listener, holding `node.client_delay_ms`."""
        # Same port as before when it is free, so clients holding old metadata find the broker again.
        port = node.proxy_port
        if not port or not _port_free(port):
            port = process.free_port()
        node.proxy_port = port
        logs = state.node_dir(node) / "logs"
        try:
            node.proxy_pid, node.proxy_pid_start = delay_proxy.start(
                port, node.address, node.client_delay_ms, self._proxy_marker(node), state.node_dir(node),
                logs / "proxy.log", self.tie_to_parent)
        except RuntimeError as exc:
            raise ClusterError(f"broker {node.node_id}: {exc}") from exc
        state.save()

    def stop(self, node: NodeState, kill: bool) -> None:
        """Controlled shutdown (SIGTERM), or with `kill` SIGKILL, of the node's JVM and its proxy."""
        if self.running(node):
            process.stop(node.pid, node.pid_start, self._marker(node), kill=kill)
        node.pid = node.pid_start = None
        self._stop_proxy(node, kill)  # a stopped broker keeps no proxy; starting it brings the proxy back

    def kill_all(self, state: ClusterState) -> None:
        """Kills every node and proxy of the cluster, also those whose pid never reached the state file."""
        for node in state.nodes:
            if self.running(node):
                process.stop(node.pid, node.pid_start, self._marker(node), kill=True, timeout=15)
            self._stop_proxy(node, kill=True)
        process.kill_marked(f"{self.directory}#")  # a JVM or proxy whose pid never reached the state file
        for node in state.nodes:
            node.pid = node.pid_start = None
            node.desired = "stopped"
        if ClusterState.exists(self.directory):
            state.save()

    def _stop_proxy(self, node: NodeState, kill: bool = False) -> None:
        if self.proxy_running(node):
            process.stop(node.proxy_pid, node.proxy_pid_start, self._proxy_marker(node), kill=kill, timeout=10)
        node.proxy_pid = node.proxy_pid_start = None

    def _marker(self, node: NodeState) -> str:
        return process.marker(self.directory, node.node_id)

    def _proxy_marker(self, node: NodeState) -> str:
        return process.proxy_marker(self.directory, node.node_id)
