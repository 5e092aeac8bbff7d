"""A node's files: before its JVM starts, its server.properties and its log dirs formatted for the
cluster (Kafka's StorageTool), on a secured cluster also the certificates; when a broker is removed
for good, its registration with the controllers and its files.

`secrets` arguments are callables that give the cluster's secrets (canary.cluster.security): they are
read only when a secured node needs them.
"""

from __future__ import annotations

import contextlib
import functools
import shutil
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from canary.cluster import distribution, node_config
from canary.cluster import security as cluster_security
from canary.cluster.distribution import KafkaDistribution
from canary.cluster.state import ClusterState, NodeState
from canary.errors import SetupError
from canary.kafka.secrets import scrub_text

SecretsSource = Callable[[], cluster_security.Secrets]


def _secured(state: ClusterState) -> bool:
    return state.security != cluster_security.PLAINTEXT


def write_properties(state: ClusterState, node: NodeState, secrets: SecretsSource) -> Path:
    """Writes the node's server.properties from the state file (0600) and returns its path."""
    path = state.node_dir(node) / "server.properties"
    path.parent.mkdir(parents=True, exist_ok=True)
    extra = None
    if _secured(state) and node.role == "broker":
        extra = cluster_security.broker_properties(state.directory, node.node_id, secrets())
    # 0600: a secured broker's file holds the keystore password.
    cluster_security.write_private(path, node_config.render(state, node, extra))
    return path


def format_node(state: ClusterState, node: NodeState, dist: KafkaDistribution, secrets: SecretsSource) -> None:
    """Formats the node's log dirs for the cluster (its id, its metadata release). Raises SetupError."""
    props = write_properties(state, node, secrets)
    args = ["format", "-t", state.cluster_id, "-c", str(props), "--release-version", state.format_release]
    if not (_secured(state) and node.role == "controller"):
        dist.run_tool("kafka.tools.StorageTool", args)
        return
    # The SCRAM user goes into the bootstrap metadata the controllers start from; its password never reaches
    # a command line.
    found = secrets()
    scram = ["--add-scram", cluster_security.scram_format_arg(found)]
    try:
        dist.run_tool("kafka.tools.StorageTool", args, secret_args=scram,
                      private_dir=cluster_security.security_dir(state.directory))
    except SetupError as exc:
        raise SetupError(scrub_text(str(exc), [found.password])) from None


def prepare_new(state: ClusterState, dists: Mapping[str, KafkaDistribution], secrets: SecretsSource) -> None:
    """A new cluster's files: on a secured cluster its secrets and certificates, and every node formatted
    (`dists`: version -> distribution), two jobs at a time."""
    directory = Path(state.directory)
    jobs: list[Callable[[], object]] = []
    if _secured(state):
        cluster_security.save_secrets(directory, secrets())
        broker_ids = [n.node_id for n in state.brokers]
        jobs.append(lambda: cluster_security.create_certificates(directory, state.cluster_id, broker_ids, secrets()))
    jobs += [functools.partial(format_node, state, node, dists[node.version], secrets) for node in state.nodes]
    with ThreadPoolExecutor(max_workers=2) as pool:
        list(pool.map(lambda job: job(), jobs))


def forget_broker(state: ClusterState, node: NodeState) -> None:
    """Unregisters a removed (stopped, no longer in `state`) broker from the controllers and deletes its
    directory and certificate files. Raises SetupError when the tool fails."""
    tool = distribution.ensure(max((n.version for n in state.brokers), key=distribution.parse_version))
    args = ["unregister", "--bootstrap-server", state.bootstrap_servers, "--id", str(node.node_id)]
    with (cluster_security.java_client_config(state.directory) if _secured(state)
          else contextlib.nullcontext()) as tool_config:
        tool.run_tool("org.apache.kafka.tools.ClusterTool",
                      args + (["--config", str(tool_config)] if tool_config else []))
    shutil.rmtree(state.node_dir(node), ignore_errors=True)
    for leftover in cluster_security.security_dir(state.directory).glob(f"broker-{node.node_id}.*"):
        leftover.unlink()
