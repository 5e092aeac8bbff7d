"""A real KRaft cluster of separate JVM processes on loopback: the embedded default.

    cluster = LocalCluster.up(Path("/tmp/c1"), brokers=3)
    cluster.restart_node(2, version=TARGET_VERSION)   # controlled shutdown, same log dirs
    cluster.restart_node(3, rack="canary-broker", client_delay_ms=50)  # a slow canary broker
    cluster.down()

Brokers listen twice: clients on `port` (the bootstrap servers), other brokers on
`replication_port`. A broker restarted with `client_delay_ms` gets a delay proxy
(`canary.faults.proxy`, its own process) and advertises the proxy's port to clients, so the
clients' requests to it are slowed and replication is not.

Layout of the cluster directory: `cluster.json` (the state file), and per node
`nodes/<id>/server.properties`, `nodes/<id>/data/` (log dirs) and `nodes/<id>/logs/`.
Every operation validates its input before it changes anything, holds the directory's lock
while it changes things, and leaves the state file true to what is running.
"""

from __future__ import annotations

import contextlib
import fcntl
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

from canary.cluster import distribution, layout, node_config, storage
from canary.cluster import security as cluster_security
from canary.cluster.distribution import BASELINE_VERSION
from canary.cluster.processes import NodeProcesses
from canary.cluster.restart import UNCHANGED, _Unchanged, apply_restart, check_restart
from canary.cluster.state import STATE_FILE, ClusterState, NodeState, Role
from canary.cluster.status import ClusterStatus, cluster_health, node_status, wait_healthy
from canary.errors import ClusterError, ClusterStateError
from canary.kafka import features, health
from canary.kafka.health import ClusterHealth
from canary.kafka.secrets import redacted
from canary.kafka.settings import kafka_python_settings


class LocalCluster:
    def __init__(self, state: ClusterState, tie_to_parent: bool = False):
        self.state = state
        self.directory = Path(state.directory)
        # Tests set `tie_to_parent` so the kernel kills the JVMs if the test process dies.
        self.processes = NodeProcesses(self.directory, tie_to_parent)
        self._secrets: cluster_security.Secrets | None = None

    # ----- creating and finding -----

    @classmethod
    def up(cls, directory: Path, brokers: int = 3, controllers: int = 1, version: str = BASELINE_VERSION,
           broker_versions: dict[int, str] | None = None, racks: list[str] | None = None,
           config: dict[str, str] | None = None, base_port: int | None = None, wait: bool = True,
           timeout: float = 120.0, tie_to_parent: bool = False, security: str = cluster_security.PLAINTEXT,
           start_delay: float = 0.0) -> LocalCluster:
        """Formats and starts a new cluster in `directory`, then (by default) waits until it is healthy.

        `start_delay`: seconds a restarted node stays down before it starts again (a rehearsal of a production
        broker's log recovery; the cluster's first start is not delayed).

        `security` "sasl_ssl" secures the brokers' client listener (SASL_SSL, SCRAM-SHA-512 user `admin`,
        certificates made here; canary.cluster.security); `client_config()` gives the settings a client needs.

        Raises ClusterStateError if the directory already holds a cluster, SetupError for an
        unknown version, PortInUseError, ClusterError for bad arguments; nothing is started then.
        """
        directory = Path(directory).resolve()
        broker_versions = broker_versions or {}
        layout.check_request(brokers, controllers, broker_versions, racks, config or {}, security)
        if not 0 <= start_delay <= 3600:
            raise ClusterError(f"start_delay must be 0 to 3600 seconds, not {start_delay}")
        if ClusterState.exists(directory):
            cls.open(directory)._refuse_new()
        versions = {version, *broker_versions.values()}
        dists = {v: distribution.ensure(v) for v in sorted(versions)}  # fetch first: fail before any change
        state = layout.new_state(directory, brokers, controllers, version, broker_versions, racks, config or {},
                                 base_port, security)
        state.start_delay_s = float(start_delay)
        shutil.rmtree(directory / "nodes", ignore_errors=True)  # logs a previous `down` left behind
        shutil.rmtree(cluster_security.security_dir(directory), ignore_errors=True)
        directory.mkdir(parents=True, exist_ok=True)
        cluster = cls(state, tie_to_parent)
        if security == cluster_security.SASL_SSL:
            cluster._secrets = cluster_security.new_secrets()
            state.client_config = str(cluster_security.client_file(directory))
            state.secrets_file = str(cluster_security.secrets_path(directory))
        with cluster._locked():
            state.save()
            try:
                storage.prepare_new(state, dists, cluster._loaded_secrets)
                for node in state.nodes:  # controllers first
                    cluster._start(node)
            except BaseException:
                cluster._discard()
                raise
        if wait:
            try:
                cluster.wait_healthy(timeout)
            except BaseException:
                cluster.down()  # a cluster that never became healthy is not left half-up; logs stay
                raise
        return cluster

    def _refuse_new(self) -> None:
        live = [n.node_id for n in self.state.nodes if self.is_running(n)]
        if live:
            raise ClusterStateError(f"a cluster is already running in {self.directory} (nodes {live}); use it, or "
                                    f"run `kafka-canary cluster down --dir {self.directory}` first")
        raise ClusterStateError(f"{self.directory} holds a stopped cluster; remove it with "
                                f"`kafka-canary cluster down --dir {self.directory}` or choose another --dir")

    @classmethod
    def open(cls, directory: Path, tie_to_parent: bool = False) -> LocalCluster:
        """The cluster another process (or this one) started in `directory`."""
        return cls(ClusterState.load(Path(directory).resolve()), tie_to_parent)

    @property
    def bootstrap_servers(self) -> str:
        return self.state.bootstrap_servers

    @property
    def secured(self) -> bool:
        return self.state.security != cluster_security.PLAINTEXT

    def client_config(self, with_secret: bool = True) -> dict[str, str]:
        """The librdkafka settings a client of this cluster needs ({} for a plaintext cluster); the password
        (sasl.password) only `with_secret`. Raises ClusterError when the credentials file cannot be read."""
        if not self.secured:
            return {}
        return cluster_security.client_settings(self.directory, self._loaded_secrets(), with_secret)

    def metrics_endpoints(self) -> dict[int, str]:
        """Broker id -> the base URL of its metrics agent (canary.cluster.metrics_agent), for brokers that have one."""
        return {n.node_id: f"http://127.0.0.1:{n.metrics_port}" for n in self.state.brokers if n.metrics_port}

    def is_running(self, node: NodeState) -> bool:
        """Whether the node's process is up (it may not serve yet)."""
        return self.processes.running(node)

    # ----- looking -----

    def status(self, timeout: float = 5.0) -> ClusterStatus:
        self.reload()
        seen = self.health(timeout)
        nodes = [node_status(node, seen, self.processes) for node in self.state.nodes]
        return ClusterStatus(str(self.directory), self.state.cluster_id, self.bootstrap_servers, nodes, seen,
                             self.state.security, redacted(self.client_config(with_secret=False)),
                             self.state.secrets_file)

    def health(self, timeout: float = 5.0) -> ClusterHealth:
        return cluster_health(self.state, self.client_config(), timeout)

    def wait_healthy(self, timeout: float = 120.0) -> ClusterHealth:
        """Waits until every broker is registered, no partition is offline or under-replicated and
        every controller has caught up with the quorum.

        Raises HealthTimeout naming what is still wrong, and any node process that died.
        """
        return wait_healthy(self.state, self.processes, self.client_config(), timeout)

    def reload(self) -> None:
        self.state = ClusterState.load(self.directory)

    # ----- changing nodes -----

    def stop_node(self, node_id: int, kill: bool = False) -> None:
        """Controlled shutdown (SIGTERM) of one node, or a hard kill (SIGKILL); it stays stopped."""
        with self._locked():
            node = self.state.node(node_id)
            self.processes.stop(node, kill)
            node.desired = "stopped"
            self.state.save()

    def start_node(self, node_id: int, wait: bool = True, timeout: float = 120.0) -> None:
        """Starts a stopped (or crashed) node with its current version and config."""
        with self._locked():
            node = self.state.node(node_id)
            if not self.is_running(node):
                self._start(node)
        if wait:
            self.wait_healthy(timeout)

    def restart_node(self, node_id: int, version: str | None = None, config: dict[str, str | None] | None = None,
                     kill: bool = False, wait: bool = True, timeout: float = 120.0,
                     role: Role | None = None, *, rack: str | None | _Unchanged = UNCHANGED,
                     client_delay_ms: float | None | _Unchanged = UNCHANGED) -> None:
        """Restarts one node, optionally on another Kafka version and/or with changed config overrides,
        keeping its log dirs. A config value of None removes that override.

        `rack` (brokers only) sets the broker's `broker.rack` from this restart on; None removes it;
        left out, the rack stays. The rollout engine marks a canary broker this way
        (`canary.lanes.canary_rack`) and unmarks it (`canary.lanes.real_rack`).

        `client_delay_ms` (brokers only) injects latency: a number > 0 starts a delay proxy in front
        of the broker's client listener (client->broker bytes held that many ms) and the broker
        advertises the proxy's port, so every client request to it is answered that much later while
        replication (its own listener) is untouched; 0 or None removes the proxy and the broker
        advertises its own port again; left out, the current delay stays. Bootstrap servers always
        name the brokers' own ports.

        Validates first (node id, version fetched, config keys, rack, delay), so a bad request changes nothing.
        With `wait`, returns once the cluster is healthy again: the node registered and back in the
        ISR of every partition it hosts.
        """
        node = self.state.node(node_id, role)
        dist = distribution.ensure(version or node.version)
        changes = config or {}
        delay = check_restart(node, changes, rack, client_delay_ms)
        with self._locked():
            stopping = self.state.node(node_id, role)
            start_delay = self.state.start_delay_s
        # Stopped outside the lock, so other nodes restart meanwhile (a batch of a promotion restarts together);
        # then, under the lock, the state re-read and the node started as changed.
        self.processes.stop(stopping, kill)
        time.sleep(start_delay)
        with self._locked():
            node = self.state.node(node_id, role)
            self.processes.stop(node, kill)  # nothing left to stop: clears the pids the state file still holds
            apply_restart(node, dist.version, changes, rack, delay)
            self.state.save()
            self._start(node)
        if wait:
            self.wait_healthy(timeout)

    def add_broker(self, version: str | None = None, rack: str | None = None,
                   config: dict[str, str] | None = None, wait: bool = True, timeout: float = 120.0) -> int:
        """Formats and starts a new broker with the next free id; returns the id."""
        version = version or self.state.brokers[0].version
        dist = distribution.ensure(version)
        node_config.validate_overrides(config or {})
        with self._locked():
            node = layout.new_broker(self.state, dist.version, rack, config or {})
            node_id = node.node_id
            self.state.nodes.append(node)
            shutil.rmtree(self.state.node_dir(node), ignore_errors=True)
            try:
                if self.secured:
                    cluster_security.add_broker_certificate(self.directory, node_id)
                storage.format_node(self.state, node, dist, self._loaded_secrets)
            except BaseException:
                self.state.nodes.remove(node)
                raise
            self.state.save()
            self._start(node)
        if wait:
            self.wait_healthy(timeout)
        return node_id

    def remove_broker(self, node_id: int, force: bool = False) -> None:
        """Stops a broker for good, unregisters it from the controllers and deletes its directory.

        Refuses while it hosts partition replicas (move them first), unless `force`.
        """
        node = self.state.node(node_id, "broker")
        if len(self.state.brokers) == 1:
            raise ClusterError("cannot remove the last broker; use `kafka-canary cluster down`")
        if not force:
            hosted = health.partitions_hosted_by(self.bootstrap_servers, node_id, client_config=self.client_config())
            if hosted:
                raise ClusterError(f"broker {node_id} hosts replicas of {len(hosted)} partitions "
                                   f"({', '.join(hosted[:5])}…); reassign them first, or pass --force")
        with self._locked():
            node = self.state.node(node_id, "broker")
            self.processes.stop(node, kill=False)
            self.state.nodes.remove(node)
            self.state.save()
            storage.forget_broker(self.state, node)

    # ----- features -----

    def features(self) -> features.FeatureLevels:
        return features.describe(self.bootstrap_servers, kafka_python_settings(self.client_config()))

    def finalize(self, release: str | None = None, levels: dict[str, int] | None = None,
                 dry_run: bool = False) -> dict[str, tuple[int, int]]:
        """Finalizes feature levels: the explicit `levels`, or those of `release` (default: the
        release every node runs) except kraft.version. Returns feature -> (old, new)."""
        wanted = dict(levels or {})
        if release or not wanted:
            wanted = distribution.finalize_levels([n.version for n in self.state.nodes], release) | wanted
        return features.finalize(self.bootstrap_servers, wanted, dry_run=dry_run,
                                 client_config=kafka_python_settings(self.client_config()))

    # ----- tearing down -----

    def down(self) -> None:
        """Stops every node (hard: the data is discarded) and deletes the state and data, keeping logs."""
        with self._locked():
            self._discard()

    def _discard(self) -> None:
        self.processes.kill_all(self.state)
        for node in self.state.nodes:
            shutil.rmtree(self.state.node_dir(node) / "data", ignore_errors=True)
        # The CA's key and the password go with the data.
        shutil.rmtree(cluster_security.security_dir(self.directory), ignore_errors=True)
        (self.directory / STATE_FILE).unlink(missing_ok=True)

    # ----- internals -----

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        # One changer at a time per cluster directory, across processes; re-read state under the lock.
        self.directory.mkdir(parents=True, exist_ok=True)
        with open(self.directory / ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if ClusterState.exists(self.directory):
                self.state = ClusterState.load(self.directory)
            yield

    def _loaded_secrets(self) -> cluster_security.Secrets:
        # Read once, when a secured cluster's client or node first needs them.
        if self._secrets is None:
            self._secrets = cluster_security.load_secrets(self.directory)
        return self._secrets

    def _start(self, node: NodeState) -> None:
        dist = distribution.ensure(node.version)
        if node.role == "broker" and node.client_delay_ms > 0 and not self.processes.proxy_running(node):
            self.processes.start_proxy(self.state, node)  # first: the rendered config advertises its port
        properties = storage.write_properties(self.state, node, self._loaded_secrets)
        self.processes.start(self.state, node, dist, properties)
