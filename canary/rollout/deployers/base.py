"""What the rollout needs from whatever runs the brokers: the Deployer interface and what it describes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from canary.broker_metrics import BrokerMetricsSource


@dataclass(frozen=True)
class BrokerInfo:
    broker_id: int
    version: str
    config: dict[str, str]          # the broker's config overrides
    rack: str | None                # broker.rack as deployed (the canary marker travels here)
    running: bool
    client_delay_ms: float = 0.0    # an injected fault in front of its client listener (0: none)

    def to_dict(self) -> dict:
        return {"id": self.broker_id, "version": self.version, "config": dict(sorted(self.config.items())),
                "rack": self.rack, "client_delay_ms": self.client_delay_ms}


@dataclass(frozen=True)
class ControllerInfo:
    node_id: int
    version: str
    running: bool

    def to_dict(self) -> dict:
        return {"id": self.node_id, "version": self.version}


class Deployer(Protocol):
    """What the rollout needs from whatever runs the brokers."""

    @property
    def bootstrap_servers(self) -> str: ...

    def brokers(self) -> list[BrokerInfo]: ...

    def controllers(self) -> list[ControllerInfo]: ...

    def prepare(self, version: str) -> None:
        """Makes `version` deployable (fetches it) or raises; called before any change."""

    def roll_broker(self, broker_id: int, *, version: str, config: dict[str, str], rack: str | None,
                    client_delay_ms: float) -> None:
        """Controlled shutdown of one broker, then start it with exactly this version, config overrides and
        rack. Returns once the process runs; registration and ISR are the caller's to wait for."""

    def roll_controller(self, node_id: int, *, version: str) -> None:
        """Restarts one controller on `version`; returns once it runs."""

    def broker_metrics(self) -> BrokerMetricsSource | None:
        """The brokers' own metrics as the deployer can read them, or None when it cannot."""


@dataclass(frozen=True)
class DockerSettings:
    name: str                       # the value of the containers' io.kafka-canary.cluster label
    image: str | None = None        # version -> image template; None: KAFKA_CANARY_IMAGE, else apache/kafka:{version}
    host: str | None = None         # the engine (DOCKER_HOST form); None: DOCKER_HOST, else the local socket
    stop_timeout: float = 120.0     # controlled shutdown, then SIGKILL
    start_timeout: float = 120.0    # until the new container serves its listener
