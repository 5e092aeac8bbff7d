"""What the rollout needs from whatever runs the brokers: the Deployer interface and what it describes."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal, Protocol, runtime_checkable

from confluent_kafka import KafkaException

from canary.broker_metrics import BrokerMetricsSource
from canary.cluster.node_config import is_managed
from canary.kafka.admin import broker_facts


def user_config(config: Mapping[str, str]) -> dict[str, str]:
    """The keys a rollout may change, of a broker's config as the cluster reports it: the deployer's own (identity,
    listeners, storage, rack) left out."""
    return {k: v for k, v in config.items() if not is_managed(k)}


def cluster_facts(bootstrap_servers: str, client_config: Mapping[str, str]
                  ) -> dict[int, tuple[str | None, dict[str, str]]]:
    """What the cluster says of each registered broker (its rack and static config, canary.kafka.admin.broker_facts);
    {} when no broker answers, so a deployer describes its nodes as what it knows and a broker the cluster does not
    know as not running."""
    try:
        return broker_facts(bootstrap_servers, client_config, timeout=5)
    except (KafkaException, TimeoutError):
        return {}


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


# What a deployer can do beyond rolling brokers to a version, config and rack (which every deployer does):
# controllers: roll the KRaft controllers (an upgrade moves them too); client_delay: inject a delay in front of a
# broker's client listener (fault.client_delay_ms, the embedded cluster's test scenarios); stop_start: stop a broker
# gracefully and start it again as it was (`kafka-canary rollout stop-broker/start-broker`; a rollout never needs it);
# concurrent_rolls: roll_broker may be called for several brokers at once, from threads (a promotion's batch restarts
# together; without it the brokers of a batch are restarted one after the other).
Capability = Literal["controllers", "client_delay", "stop_start", "concurrent_rolls"]


class Deployer(Protocol):
    """What the rollout needs from whatever runs the brokers."""

    @property
    def capabilities(self) -> frozenset[Capability]: ...

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

    def process_running(self, broker_id: int) -> bool | None:
        """Whether the broker's process runs now (None: this deployer cannot tell). Asked every few seconds while a
        rolled broker registers, so a broker that died after its roll is named at once."""

    def exit_cause(self, broker_id: int) -> str | None:
        """Why the broker's process stopped, in its own words (its log's fatal exception), or None: not known to
        this deployer (the command deployer's roll prints the log itself)."""
        return None

    def stop_broker(self, broker_id: int) -> None:
        """Controlled shutdown of one broker; it stays stopped (capability stop_start)."""

    def start_broker(self, broker_id: int) -> None:
        """Starts a stopped broker as it was; returns once its process runs (capability stop_start)."""

    def broker_metrics(self) -> BrokerMetricsSource | None:
        """The brokers' own metrics as the deployer can read them, or None when it cannot."""


@dataclass(frozen=True)
class DockerSettings:
    name: str                       # the value of the containers' io.kafka-canary.cluster label
    image: str | None = None        # version -> image template; None: KAFKA_CANARY_IMAGE, else apache/kafka:{version}
    host: str | None = None         # the engine (DOCKER_HOST form); None: DOCKER_HOST, else the local socket
    stop_timeout: float = 120.0     # controlled shutdown, then SIGKILL
    start_timeout: float = 120.0    # until the new container serves its listener


@runtime_checkable
class Reporting(Protocol):
    """A deployer that runs actions worth an audit line of their own (the command deployer: each command, its exit
    status and output); the rollout hands it a recorder (action, details)."""

    def report_to(self, record: Callable[[str, dict], object]) -> None: ...


@dataclass(frozen=True)
class CommandSettings:
    """The command deployer: shell command templates (see canary.rollout.deployers.command)."""
    brokers: Mapping[int, str]                       # broker id -> host (the {host} of its commands)
    roll: str                                        # stop, reconfigure and start one broker
    describe: str                                    # prints the node's version (and running/stopped)
    controllers: Mapping[int, str] = field(default_factory=dict)  # controller id -> host
    roll_controller: str | None = None               # restart one controller on {version}
    prepare: str | None = None                       # make {version} installable on every host, before any change
    stop: str | None = None                          # stop one broker gracefully (with start: capability stop_start)
    start: str | None = None                         # start it again as it was
    timeout: float = 600.0                           # per roll, prepare or controller roll
    describe_timeout: float = 30.0                   # per describe
