"""What a container is made of, read from `docker inspect` and re-created from it: the image, its environment (the
node's config), labels, mounts (the data volume), networks with their aliases, ports, command. A roll re-creates a
node's container from its spec with another image and config; the spec it replaced travels in a label, so a
rollback re-creates exactly that."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import docker
from docker.models.containers import Container
from docker.types import Mount

from canary.containers import env

LABEL = "io.kafka-canary."
CLUSTER, NODE_ID, ROLE, VERSION = LABEL + "cluster", LABEL + "node-id", LABEL + "role", LABEL + "version"
CREATED, PREVIOUS = LABEL + "created-by", LABEL + "previous"
METRICS_PORT, ADDRESS = LABEL + "metrics-port", LABEL + "address"


@dataclass(frozen=True)
class ContainerSpec:
    name: str
    image: str
    environment: dict[str, str]
    labels: dict[str, str]
    mounts: list[dict[str, Any]] = field(default_factory=list)   # {type, source, target, read_only}
    network_mode: str = "host"
    networks: dict[str, list[str]] = field(default_factory=dict)  # network -> aliases (not with host networking)
    ports: dict[str, Any] = field(default_factory=dict)           # HostConfig.PortBindings
    hostname: str | None = None
    command: list[str] | None = None
    entrypoint: list[str] | None = None
    user: str | None = None
    restart_policy: dict[str, Any] | None = None
    healthcheck: dict[str, Any] | None = None                     # Config.Healthcheck (compose's healthcheck:)
    init: bool | None = None                                      # HostConfig.Init (compose's init:)

    @classmethod
    def of(cls, container: Container, image_environment: list[str]) -> ContainerSpec:
        """The spec `container` was created with; variables equal to its image's own are left to the image."""
        a = container.attrs
        config, host = a["Config"], a["HostConfig"]
        own = set(image_environment)
        mounts = [{"type": m["Type"], "source": m.get("Name") or m["Source"], "target": m["Destination"],
                   "read_only": not m.get("RW", True)}
                  for m in a.get("Mounts") or [] if m["Type"] in ("volume", "bind")]
        networks = {} if host.get("NetworkMode") == "host" else {
            name: [x for x in (n.get("Aliases") or []) if x != config.get("Hostname") and x != a["Id"][:12]]
            for name, n in (a["NetworkSettings"].get("Networks") or {}).items()}
        return cls(name=a["Name"].lstrip("/"), image=config["Image"],
                   environment=env.parse(x for x in config.get("Env") or [] if x not in own),
                   labels=dict(config.get("Labels") or {}), mounts=mounts,
                   network_mode=host.get("NetworkMode") or "host",
                   networks=networks, ports=host.get("PortBindings") or {},
                   hostname=None if host.get("NetworkMode") == "host" else config.get("Hostname"),
                   command=config.get("Cmd"), entrypoint=config.get("Entrypoint"), user=config.get("User") or None,
                   restart_policy=host.get("RestartPolicy"), healthcheck=config.get("Healthcheck") or None,
                   init=host.get("Init"))

    def with_image(self, image: str, **labels: str) -> ContainerSpec:
        return replace(self, image=image, labels=self.labels | labels)

    def to_json(self) -> str:
        """The spec as a label value: without the spec it replaced (one step back is kept, not a chain)."""
        labels = {k: v for k, v in self.labels.items() if k != PREVIOUS}
        return json.dumps(asdict(replace(self, labels=labels)), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> ContainerSpec:
        return cls(**json.loads(text))

    def same_node_as(self, other: ContainerSpec) -> bool:
        """Whether both run the same image with the same environment (what a node is)."""
        return self.image == other.image and self.environment == other.environment

    def create(self, client: docker.DockerClient) -> Container:
        api = client.api
        mounts = [Mount(m["target"], m["source"], type=m["type"], read_only=m["read_only"]) for m in self.mounts]
        host = api.create_host_config(mounts=mounts, network_mode=self.network_mode, port_bindings=self.ports or None,
                                      restart_policy=self.restart_policy or None, init=self.init)
        first = next(iter(self.networks), None)
        networking = api.create_networking_config(
            {first: api.create_endpoint_config(aliases=self.networks[first] or None)}) if first else None
        created = api.create_container(self.image, name=self.name, environment=self.environment, labels=self.labels,
                                       host_config=host, networking_config=networking, hostname=self.hostname,
                                       command=self.command, entrypoint=self.entrypoint, user=self.user or None,
                                       ports=list(self.ports) or None, healthcheck=self.healthcheck)
        for name, aliases in list(self.networks.items())[1:]:
            api.connect_container_to_network(created["Id"], name, aliases=aliases or None)
        return client.containers.get(created["Id"])
