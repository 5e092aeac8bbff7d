"""The docker deployer: brokers and controllers as containers on a Docker engine, found by their labels
(`io.kafka-canary.cluster`, `.node-id`, `.role`), whether `kafka-canary cluster up --runtime docker` made them or a
compose file or a platform team's own tooling did.

What the cluster can tell is read from the cluster: each broker's config (DescribeConfigs, from its
server.properties) and rack (its registration); what only the deployer knows comes from the containers: the version
(label, else the image tag by the template) and whether the container runs. A roll re-creates the node's container
with the target image and config on the same data volume (canary.containers.nodes.replace); the spec it replaced
is kept in a label, and a roll back to it re-creates exactly that spec."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace

from docker.models.containers import Container

from canary.broker_metrics import BrokerMetricsSource, ExporterSource
from canary.containers import engine, env, images, nodes
from canary.containers.spec import ADDRESS, METRICS_PORT, PREVIOUS, VERSION, ContainerSpec
from canary.errors import ClusterError
from canary.kafka import broker_config
from canary.kafka.broker_log import TAIL_LINES, fatal_cause
from canary.rollout.deployers.base import (
    BrokerInfo,
    Capability,
    ControllerInfo,
    DockerSettings,
    cluster_facts,
    user_config,
)


class DockerDeployer:
    def __init__(self, settings: DockerSettings, bootstrap_servers: str | None = None,
                 client_config: dict[str, str] | None = None):
        self.settings = settings
        self.engine_at = engine.where(settings.host)
        self.client = engine.connect(settings.host)
        self._bootstrap = bootstrap_servers
        self.client_config = client_config or {}
        self._record: Callable[[str, dict], object] | None = None

    def _nodes(self, role: str) -> dict[int, Container]:
        found = {node_id: c for (r, node_id), c in nodes.find(self.client, self.settings.name).items() if r == role}
        if not found and role == "broker":
            raise ClusterError(f"no broker containers labelled io.kafka-canary.cluster={self.settings.name} on the "
                               f"Docker engine; start a cluster with `kafka-canary cluster up --runtime docker --name "
                               f"{self.settings.name}`, or label your nodes' containers (cluster, node-id, role)")
        return dict(sorted(found.items()))

    def _container(self, role: str, node_id: int) -> Container:
        found = self._nodes(role)
        if node_id not in found:
            raise ClusterError(f"cluster {self.settings.name} has no {role} container with node id {node_id}; its "
                               f"{role} ids are {sorted(found)}")
        return found[node_id]

    @property
    def capabilities(self) -> frozenset[Capability]:
        return frozenset({"controllers", "stop_start", "concurrent_rolls"})  # each roll its own container

    @property
    @engine.answering
    def bootstrap_servers(self) -> str:
        if self._bootstrap:
            return self._bootstrap
        addresses = [c.labels[ADDRESS] for c in self._nodes("broker").values() if c.labels.get(ADDRESS)]
        if not addresses:
            raise ClusterError(f"the brokers of cluster {self.settings.name} carry no io.kafka-canary.address label; "
                               f"give cluster.bootstrap_servers in the spec")
        return ",".join(addresses)

    def _version(self, container: Container) -> str:
        if container.labels.get(VERSION):
            return container.labels[VERSION]
        tmpl = re.escape(self.settings.image or images.template()).replace(r"\{version\}", r"(\d+\.\d+\.\d+)")
        match = re.fullmatch(tmpl, container.attrs["Config"]["Image"])
        return match[1] if match else "unknown"

    @engine.answering
    def brokers(self) -> list[BrokerInfo]:
        containers = self._nodes("broker")
        facts = cluster_facts(self.bootstrap_servers, self.client_config)  # {}: what the containers were given is all
        found = []
        for node_id, c in containers.items():
            environment = env.parse(c.attrs["Config"].get("Env") or [])
            given = (environment.get(env.variable("broker.rack")), env.config_of(environment))
            rack, config = facts.get(node_id, given)
            found.append(BrokerInfo(node_id, self._version(c), user_config(config), rack or None,
                                    c.status == "running"))
        return found

    @engine.answering
    def process_running(self, broker_id: int) -> bool | None:
        container = self._nodes("broker").get(broker_id)
        return container is not None and container.status == "running"

    @engine.answering
    def exit_cause(self, broker_id: int) -> str | None:
        container = self._nodes("broker").get(broker_id)
        if container is None:
            return None
        return fatal_cause(container.logs(tail=TAIL_LINES).decode(errors="replace").splitlines())

    @engine.answering
    def controllers(self) -> list[ControllerInfo]:
        return [ControllerInfo(node_id, self._version(c), c.status == "running")
                for node_id, c in self._nodes("controller").items()]

    @engine.answering
    def prepare(self, version: str) -> None:
        images.ensure(self.client, version, self.settings.image)

    @engine.answering
    def roll_broker(self, broker_id: int, *, version: str, config: dict[str, str], rack: str | None,
                    client_delay_ms: float) -> None:
        if client_delay_ms:
            raise ClusterError("the docker deployer injects no client delay (fault.client_delay_ms is for the local "
                               "cluster's tests)")
        wanted = config | ({"broker.rack": rack} if rack else {})
        # The last guard, whatever path a value took (the spec refuses these; a broker's own config comes from the
        # cluster): an image writes each variable as a server.properties line, where a line break adds a setting and
        # a trailing backslash swallows the next one.
        problems = broker_config.config_problems(wanted)
        if problems:
            raise ClusterError(f"broker {broker_id}: config refused before its container was touched: "
                               f"{'; '.join(problems)}")
        container = self._recovered("broker", broker_id)
        before = next(b for b in self.brokers() if b.broker_id == broker_id)
        current = nodes.spec_of(self.client, container)
        environment = env.with_config(current.environment, wanted, replaced={*before.config, *wanted, "broker.rack"})
        self._roll(container, current, replace(current, environment=environment), version)

    @engine.answering
    def roll_controller(self, node_id: int, *, version: str) -> None:
        container = self._recovered("controller", node_id)
        current = nodes.spec_of(self.client, container)
        self._roll(container, current, current, version)

    @engine.answering
    def stop_broker(self, broker_id: int) -> None:
        self._container("broker", broker_id).stop(timeout=int(self.settings.stop_timeout))

    @engine.answering
    def start_broker(self, broker_id: int) -> None:
        container = self._container("broker", broker_id)
        nodes.start(container, nodes.listener_port(nodes.spec_of(self.client, container)), self.settings.start_timeout)

    def _recovered(self, role: str, node_id: int) -> Container:
        """The node's container, after what a crash in the middle of an earlier roll left is put right."""
        for line in nodes.recover(self.client, self.settings.name):
            if self._record:
                self._record("container recovered", {"what": line})
        return self._container(role, node_id)

    def report_to(self, record: Callable[[str, dict], object]) -> None:
        self._record = record

    def _roll(self, container: Container, current: ContainerSpec, new: ContainerSpec, version: str) -> None:
        image = images.ensure(self.client, version, self.settings.image)
        new = new.with_image(image, **{VERSION: version, PREVIOUS: current.to_json()})
        previous = nodes.previous_spec(container)
        if previous and previous.same_node_as(new):  # back to what it was: exactly that spec
            new = previous.with_image(previous.image, **{PREVIOUS: current.to_json()})
        if new.same_node_as(current) and container.status == "running":
            # Nothing to change, yet the roll restarts it (the Deployer contract): a control broker is restarted as
            # it is, to be as fresh as the canary it is compared with. The container keeps its spec and labels.
            nodes.restart(container, nodes.listener_port(current), self.settings.stop_timeout,
                          self.settings.start_timeout)
            return
        nodes.replace(self.client, container, new, self.settings.stop_timeout, self.settings.start_timeout)

    @engine.answering
    def broker_metrics(self) -> BrokerMetricsSource | None:
        """The metrics agents of brokers in our images (the port in their label, on the host's network)."""
        ports = {node_id: c.labels.get(METRICS_PORT) for node_id, c in self._nodes("broker").items()}
        if not all(ports.values()):
            return None
        return ExporterSource({node_id: f"http://127.0.0.1:{port}" for node_id, port in ports.items()})
