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

import base64
import contextlib
import fcntl
import math
import shutil
import socket
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from canary import process
from canary.cluster import distribution, node_config
from canary.cluster import security as cluster_security
from canary.cluster.distribution import BASELINE_VERSION, KafkaDistribution
from canary.cluster.state import LOOPBACK, STATE_FILE, ClusterState, NodeState, Role
from canary.errors import ClusterError, ClusterStateError, HealthTimeout, SetupError
from canary.faults import proxy as delay_proxy
from canary.kafka import features, health
from canary.kafka.secrets import redacted, scrub_text
from canary.kafka.settings import kafka_python_settings

CONTROLLER_ID_BASE = 3000  # broker ids are 1..N; controller ids stay clear of them
BROKER_HEAP = "320m"
CONTROLLER_HEAP = "192m"
# C1 only (TieredStopAtLevel=1): C2 compiling spent ~40 % of a fresh broker's CPU in its first minute on two
# cores, and a just-restarted (canary) broker ran slower than its warm peers until it was done. Measured on a
# fresh 3-broker cluster, 1,000 msg/s acks=all: first 30 s p50 12 ms (C2: 93 ms), broker CPU over the first
# minute 26 s (C2: 34 s); the probe's peak rate is the same (~7,500 msg/s, the probe process is the limit).
_JVM_OPTS = ["-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-XX:MaxMetaspaceSize=96m", "-XX:ReservedCodeCacheSize=64m",
             "-XX:MaxDirectMemorySize=64m", "-Xss512k", "-Djava.awt.headless=true", "-Xshare:auto"]


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


class _Unchanged:
    """The default of `restart_node`'s keyword parameters whose None has a meaning of its own."""

    def __repr__(self) -> str:
        return "UNCHANGED"


UNCHANGED = _Unchanged()


def _new_cluster_id() -> str:
    # Like Kafka's Uuid.randomUuid: never starting with "-", which the storage tool would read as an option.
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


def _client_delay(value: float | None) -> float:
    """A `client_delay_ms` argument as a number of ms >= 0 (None means 0), or ClusterError."""
    if value is None:
        return 0.0
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise ClusterError(f"client delay {value!r} is not a delay; pass milliseconds >= 0 (0 or None removes "
                           f"the delay proxy)")
    return float(value)


def _free_ports(count: int) -> list[int]:
    # Held open together, so the kernel hands out `count` different ports.
    socks = []
    try:
        for _ in range(count):
            sock = socket.socket()
            sock.bind((LOOPBACK, 0))
            socks.append(sock)
        return [s.getsockname()[1] for s in socks]
    finally:
        for sock in socks:
            sock.close()


def _port_free(port: int) -> bool:
    try:
        process.require_free(port, "delay proxy")
    except ClusterError:
        return False
    return True


class LocalCluster:
    def __init__(self, state: ClusterState, tie_to_parent: bool = False):
        self.state = state
        self.directory = Path(state.directory)
        # Tests set this so the kernel kills the JVMs if the test process dies.
        self.tie_to_parent = tie_to_parent
        self._secrets: cluster_security.Secrets | None = None

    # ----- creating and finding -----

    @classmethod
    def up(cls, directory: Path, brokers: int = 3, controllers: int = 1, version: str = BASELINE_VERSION,
           broker_versions: dict[int, str] | None = None, racks: list[str] | None = None,
           config: dict[str, str] | None = None, base_port: int | None = None, wait: bool = True,
           timeout: float = 120.0, tie_to_parent: bool = False, security: str = cluster_security.PLAINTEXT
           ) -> LocalCluster:
        """Formats and starts a new cluster in `directory`, then (by default) waits until it is healthy.

        `security` "sasl_ssl" secures the brokers' client listener (SASL_SSL, SCRAM-SHA-512 user `admin`,
        certificates made here; canary.cluster.security); `client_config()` gives the settings a client needs.

        Raises ClusterStateError if the directory already holds a cluster, SetupError for an
        unknown version, PortInUseError, ClusterError for bad arguments; nothing is started then.
        """
        directory = Path(directory).resolve()
        cluster_security.check_mode(security)
        if brokers < 1:
            raise ClusterError(f"--brokers must be at least 1, got {brokers}")
        if controllers not in (1, 3, 5):
            raise ClusterError(f"--controllers must be 1, 3 or 5 (a quorum needs an odd size), got {controllers}")
        broker_versions = broker_versions or {}
        unknown = sorted(set(broker_versions) - set(range(1, brokers + 1)))
        if unknown:
            raise ClusterError(f"per-broker versions name brokers {unknown}, but broker ids are 1..{brokers}")
        node_config.validate_overrides(config or {})
        if racks is not None and (not racks or any(not r.strip() for r in racks)):
            raise ClusterError("--racks needs non-empty rack names, e.g. --racks a,b,c")
        if ClusterState.exists(directory):
            old = LocalCluster.open(directory)
            live = [n.node_id for n in old.state.nodes if old._is_running(n)]
            if live:
                raise ClusterStateError(f"a cluster is already running in {directory} (nodes {live}); use it, or "
                                        f"run `kafka-canary cluster down --dir {directory}` first")
            raise ClusterStateError(f"{directory} holds a stopped cluster; remove it with "
                                    f"`kafka-canary cluster down --dir {directory}` or choose another --dir")
        versions = {version, *broker_versions.values()}
        dists = {v: distribution.ensure(v) for v in sorted(versions)}  # fetch first: fail before any change

        count = controllers + brokers
        # One port per node, then one replication listener per broker.
        wanted = count + brokers
        ports = list(range(base_port, base_port + wanted)) if base_port else _free_ports(wanted)
        for port in ports:
            process.require_free(port, "a node of the new cluster")
        nodes = [NodeState(CONTROLLER_ID_BASE + i, "controller", version, ports[i]) for i in range(controllers)]
        for i in range(brokers):
            broker_id = i + 1
            nodes.append(NodeState(broker_id, "broker", broker_versions.get(broker_id, version),
                                   ports[controllers + i], rack=racks[i % len(racks)] if racks else None,
                                   config=dict(config or {}), replication_port=ports[count + i]))
        oldest = min(versions, key=distribution.parse_version)
        state = ClusterState(cluster_id=_new_cluster_id(), directory=str(directory),
                             format_release=distribution.release_of(oldest), broker_heap=BROKER_HEAP,
                             controller_heap=CONTROLLER_HEAP, nodes=nodes, security=security)
        shutil.rmtree(directory / "nodes", ignore_errors=True)  # logs a previous `down` left behind
        shutil.rmtree(cluster_security.security_dir(directory), ignore_errors=True)
        directory.mkdir(parents=True, exist_ok=True)
        cluster = cls(state, tie_to_parent)
        secured = security == cluster_security.SASL_SSL
        if secured:
            cluster._secrets = cluster_security.new_secrets()
            state.client_config = str(cluster_security.client_file(directory))
            state.secrets_file = str(cluster_security.secrets_path(directory))
        with cluster._locked():
            state.save()
            try:
                jobs = []
                if secured:
                    cluster_security.save_secrets(directory, cluster._secrets)
                    brokers_ids = [n.node_id for n in state.brokers]
                    jobs.append(lambda: cluster_security.create_certificates(directory, state.cluster_id, brokers_ids,
                                                                     cluster._secrets))
                jobs += [lambda n=n: cluster._format(n, dists[n.version]) for n in nodes]
                with ThreadPoolExecutor(max_workers=2) as pool:
                    list(pool.map(lambda job: job(), jobs))
                for node in nodes:  # controllers first
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
        if self._secrets is None:
            self._secrets = cluster_security.load_secrets(self.directory)
        return cluster_security.client_settings(self.directory, self._secrets, with_secret)

    # ----- looking -----

    def status(self, timeout: float = 5.0) -> ClusterStatus:
        self.reload()
        seen = self.health(timeout)
        nodes = []
        for node in self.state.nodes:
            if self._is_running(node):
                if node.role == "broker":
                    state = "online" if node.node_id in seen.registered_brokers else "starting"
                else:
                    state = "online" if process.accepts_connections(node.port) else "starting"
            else:
                state = "stopped" if node.desired == "stopped" else "down"
            proxy = None
            if node.client_delay_ms > 0:
                proxy = "running" if self._proxy_running(node) else "down"
            nodes.append(NodeStatus(node.node_id, node.role, node.version, node.rack,
                                    node.pid if state not in ("down", "stopped") else None, node.port, state,
                                    dict(node.config), node.client_delay_ms,
                                    node.proxy_port if node.client_delay_ms > 0 else None, proxy))
        return ClusterStatus(str(self.directory), self.state.cluster_id, self.bootstrap_servers, nodes, seen,
                             self.state.security, redacted(self.client_config(with_secret=False)),
                             self.state.secrets_file)

    def health(self, timeout: float = 5.0) -> health.ClusterHealth:
        # A stopped broker counts: the cluster is degraded until it is back.
        brokers = [n.node_id for n in self.state.brokers]
        voters = [n.node_id for n in self.state.controllers]
        return health.check(self.bootstrap_servers, brokers, timeout=timeout, expected_voters=voters,
                            client_config=self.client_config())

    def wait_healthy(self, timeout: float = 120.0) -> health.ClusterHealth:
        """Waits until every broker is registered, no partition is offline or under-replicated and
        every controller has caught up with the quorum.

        Raises HealthTimeout naming what is still wrong, and any node process that died.
        """
        deadline = time.monotonic() + timeout
        while True:
            seen = self.health()
            if seen.healthy:
                return seen
            dead = [n.node_id for n in self.state.nodes if n.desired == "running" and not self._is_running(n)]
            # A delayed broker whose proxy died is unreachable for clients although it looks registered.
            dead += [n.node_id for n in self.state.brokers if n.desired == "running" and n.client_delay_ms > 0
                     and n.node_id not in dead and not self._proxy_running(n)]
            if dead or time.monotonic() > deadline:
                logs = ", ".join(str(self.state.node_dir(self.state.node(i)) / "logs") for i in dead)
                raise HealthTimeout(f"cluster in {self.directory} not healthy after {timeout:.0f}s: {seen.reason()}"
                                    + (f"; nodes {dead} (or their delay proxies) exited (see {logs})" if dead else ""))
            time.sleep(0.5)

    def reload(self) -> None:
        self.state = ClusterState.load(self.directory)

    # ----- changing nodes -----

    def stop_node(self, node_id: int, kill: bool = False) -> None:
        """Controlled shutdown (SIGTERM) of one node, or a hard kill (SIGKILL); it stays stopped."""
        with self._locked():
            node = self.state.node(node_id)
            self._stop(node, kill)
            node.desired = "stopped"
            self.state.save()

    def start_node(self, node_id: int, wait: bool = True, timeout: float = 120.0) -> None:
        """Starts a stopped (or crashed) node with its current version and config."""
        with self._locked():
            node = self.state.node(node_id)
            if not self._is_running(node):
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
        node_config.validate_overrides({k: v for k, v in changes.items() if v is not None})
        if node.role == "controller" and changes:
            raise ClusterError("config overrides apply to brokers; controllers take the cluster defaults")
        if rack is not UNCHANGED:
            if node.role == "controller":
                raise ClusterError(f"node {node_id} is a controller; a rack (broker.rack) applies to brokers only")
            if rack is not None and (not isinstance(rack, str) or not rack.strip() or rack.strip() != rack):
                raise ClusterError(f"rack {rack!r} is not a rack name; pass a non-empty name without "
                                   f"surrounding spaces, or None to remove the rack")
        delay = node.client_delay_ms if client_delay_ms is UNCHANGED else _client_delay(client_delay_ms)
        if client_delay_ms is not UNCHANGED and node.role == "controller":
            raise ClusterError(f"node {node_id} is a controller; a client delay applies to a broker's client "
                               f"listener only")
        if delay > 0 and not node.replication_port:
            raise ClusterError(f"broker {node_id} has no separate replication listener (its cluster was started by "
                               f"an older kafka-canary), so a delay proxy would slow replication too; start a new "
                               f"cluster to inject a client delay")
        with self._locked():
            node = self.state.node(node_id, role)
            self._stop(node, kill)
            node.version = dist.version
            if rack is not UNCHANGED:
                node.rack = rack
            node.client_delay_ms = delay
            if delay == 0:
                node.proxy_port = None
            for key, value in changes.items():
                if value is None:
                    node.config.pop(key, None)
                else:
                    node.config[key] = value
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
            node_id = max((n.node_id for n in self.state.brokers), default=0) + 1
            port, replication_port = _free_ports(2)
            # Replication goes over the listener the other brokers use: the separate one when they have it.
            if not all(b.replication_port for b in self.state.brokers):
                replication_port = None
            node = NodeState(node_id, "broker", dist.version, port, rack=rack, config=dict(config or {}),
                             replication_port=replication_port)
            self.state.nodes.append(node)
            shutil.rmtree(self.state.node_dir(node), ignore_errors=True)
            try:
                if self.secured:
                    cluster_security.add_broker_certificate(self.directory, node_id)
                self._format(node, dist)
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
            self._stop(node, kill=False)
            self.state.nodes.remove(node)
            self.state.save()
            tool = distribution.ensure(max((n.version for n in self.state.brokers), key=distribution.parse_version))
            args = ["unregister", "--bootstrap-server", self.bootstrap_servers, "--id", str(node_id)]
            with (cluster_security.java_client_config(self.directory) if self.secured
                  else contextlib.nullcontext()) as tool_config:
                tool.run_tool("org.apache.kafka.tools.ClusterTool",
                              args + (["--config", str(tool_config)] if tool_config else []))
            shutil.rmtree(self.state.node_dir(node), ignore_errors=True)
            for leftover in cluster_security.security_dir(self.directory).glob(f"broker-{node_id}.*"):
                leftover.unlink()

    # ----- features -----

    def features(self) -> features.FeatureLevels:
        return features.describe(self.bootstrap_servers, kafka_python_settings(self.client_config()))

    def finalize(self, release: str | None = None, levels: dict[str, int] | None = None,
                 dry_run: bool = False) -> dict[str, tuple[int, int]]:
        """Finalizes feature levels: the explicit `levels`, or those of `release` (default: the
        release every node runs) except kraft.version. Returns feature -> (old, new)."""
        wanted = dict(levels or {})
        if release or not wanted:
            newest = max((n.version for n in self.state.nodes), key=distribution.parse_version)
            oldest = min((n.version for n in self.state.nodes), key=distribution.parse_version)
            release = release or distribution.release_of(oldest)
            mapped = distribution.release_levels(release, distribution.ensure(newest))
            wanted = {k: v for k, v in mapped.items() if k not in features.NOT_BY_DEFAULT and v > 0} | wanted
        return features.finalize(self.bootstrap_servers, wanted, dry_run=dry_run,
                                 client_config=kafka_python_settings(self.client_config()))

    # ----- tearing down -----

    def down(self) -> None:
        """Stops every node (hard: the data is discarded) and deletes the state and data, keeping logs."""
        with self._locked():
            self._discard()

    def _discard(self) -> None:
        self._kill_all()
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

    def _marker(self, node: NodeState) -> str:
        return process.marker(self.directory, node.node_id)

    def _is_running(self, node: NodeState) -> bool:
        return process.is_ours(node.pid, node.pid_start, self._marker(node))

    def _properties_file(self, node: NodeState) -> Path:
        path = self.state.node_dir(node) / "server.properties"
        path.parent.mkdir(parents=True, exist_ok=True)
        extra = None
        if self.secured and node.role == "broker":
            self.client_config()  # loads the secrets
            extra = cluster_security.broker_properties(self.directory, node.node_id, self._secrets)
        # 0600: a secured broker's file holds the keystore password.
        cluster_security.write_private(path, node_config.render(self.state, node, extra))
        return path

    def _format(self, node: NodeState, dist: KafkaDistribution) -> None:
        props = self._properties_file(node)
        args = ["format", "-t", self.state.cluster_id, "-c", str(props), "--release-version", self.state.format_release]
        if not (self.secured and node.role == "controller"):
            dist.run_tool("kafka.tools.StorageTool", args)
            return
        # The SCRAM user goes into the bootstrap metadata the controllers start from; its password never reaches
        # a command line.
        self.client_config()
        scram = ["--add-scram", cluster_security.scram_format_arg(self._secrets)]
        try:
            dist.run_tool("kafka.tools.StorageTool", args, secret_args=scram,
                          private_dir=cluster_security.security_dir(self.directory))
        except SetupError as exc:
            raise SetupError(scrub_text(str(exc), [self._secrets.password])) from None

    def _proxy_marker(self, node: NodeState) -> str:
        return process.proxy_marker(self.directory, node.node_id)

    def _proxy_running(self, node: NodeState) -> bool:
        return process.is_ours(node.proxy_pid, node.proxy_pid_start, self._proxy_marker(node))

    def _start_proxy(self, node: NodeState) -> None:
        # Same port as before when it is free, so clients holding old metadata find the broker again.
        port = node.proxy_port
        if not port or not _port_free(port):
            port = process.free_port()
        node.proxy_port = port
        logs = self.state.node_dir(node) / "logs"
        try:
            node.proxy_pid, node.proxy_pid_start = delay_proxy.start(
                port, node.address, node.client_delay_ms, self._proxy_marker(node), self.state.node_dir(node),
                logs / "proxy.log", self.tie_to_parent)
        except RuntimeError as exc:
            raise ClusterError(f"broker {node.node_id}: {exc}") from exc
        self.state.save()

    def _stop_proxy(self, node: NodeState, kill: bool = False) -> None:
        if self._proxy_running(node):
            process.stop(node.proxy_pid, node.proxy_pid_start, self._proxy_marker(node), kill=kill, timeout=10)
        node.proxy_pid = node.proxy_pid_start = None

    def _start(self, node: NodeState) -> None:
        dist = distribution.ensure(node.version)
        if node.role == "broker" and node.client_delay_ms > 0 and not self._proxy_running(node):
            self._start_proxy(node)  # first: the rendered config advertises its port
        props = self._properties_file(node)
        logs = self.state.node_dir(node) / "logs"
        heap = self.state.broker_heap if node.role == "broker" else self.state.controller_heap
        jvm = [f"-Xms{heap}", f"-Xmx{heap}", *_JVM_OPTS, f"-Dkafka.logs.dir={logs}", self._marker(node)]
        cmd = dist.java_command("kafka.Kafka", [str(props)], jvm, tool=False)
        node.pid, node.pid_start = process.start(cmd, self.state.node_dir(node), logs / "stdout.log",
                                                 self.tie_to_parent)
        node.desired = "running"
        self.state.save()

    def _stop(self, node: NodeState, kill: bool) -> None:
        if self._is_running(node):
            process.stop(node.pid, node.pid_start, self._marker(node), kill=kill)
        node.pid = node.pid_start = None
        self._stop_proxy(node, kill)  # a stopped broker keeps no proxy; `_start` brings it back

    def _kill_all(self) -> None:
        for node in self.state.nodes:
            if self._is_running(node):
                process.stop(node.pid, node.pid_start, self._marker(node), kill=True, timeout=15)
            self._stop_proxy(node, kill=True)
        process.kill_marked(f"{self.directory}#")  # a JVM or proxy whose pid never reached the state file
        for node in self.state.nodes:
            node.pid = node.pid_start = None
            node.desired = "stopped"
        if ClusterState.exists(self.directory):
            self.state.save()
