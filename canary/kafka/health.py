"""Cluster health as a client sees it: which brokers are registered and unfenced, and which
partitions are offline or under-replicated. Works against any cluster, local or remote."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from confluent_kafka import KafkaError as KafkaError_
from confluent_kafka import KafkaException, Node
from confluent_kafka.admin import AdminClient, ClusterMetadata
from kafka.admin import KafkaAdminClient
from kafka.errors import KafkaError

from canary.kafka.clients import admin_client
from canary.kafka.settings import kafka_python_settings


@dataclass
class ClusterHealth:
    expected_brokers: list[int]
    registered_brokers: list[int] = field(default_factory=list)
    offline_partitions: list[str] = field(default_factory=list)
    under_replicated: list[str] = field(default_factory=list)
    lagging_voters: list[int] = field(default_factory=list)  # controllers not caught up with the quorum leader
    error: str | None = None

    @property
    def missing_brokers(self) -> list[int]:
        return sorted(set(self.expected_brokers) - set(self.registered_brokers))

    @property
    def healthy(self) -> bool:
        return not (self.error or self.missing_brokers or self.offline_partitions or self.under_replicated
                    or self.lagging_voters)

    def reason(self) -> str:
        if self.error:
            return self.error
        parts = []
        if self.missing_brokers:
            parts.append(f"brokers not registered or fenced: {self.missing_brokers}")
        if self.offline_partitions:
            parts.append(f"offline partitions: {_abbrev(self.offline_partitions)}")
        if self.under_replicated:
            parts.append(f"under-replicated partitions: {_abbrev(self.under_replicated)}")
        if self.lagging_voters:
            parts.append(f"controllers not caught up with the quorum: {self.lagging_voters}")
        return "; ".join(parts) or "healthy"

    def to_dict(self) -> dict:
        return {"healthy": self.healthy, "reason": self.reason(), "registered_brokers": self.registered_brokers,
                "offline_partitions": self.offline_partitions, "under_replicated": self.under_replicated,
                "lagging_voters": self.lagging_voters}


def _abbrev(items: list[str], limit: int = 8) -> str:
    return ", ".join(items[:limit]) + (f" and {len(items) - limit} more" if len(items) > limit else "")


def metadata_and_brokers(admin: AdminClient, timeout: float) -> tuple[ClusterMetadata, list[Node]]:
    """All topics' metadata, then the registered brokers (id, host, port, rack), from one long-lived client.

    The Metadata request goes first on purpose: librdkafka learns a broker's new address only from metadata, and
    DescribeCluster goes to the broker it takes for the controller. A client whose "controller" came back on
    another port (a broker restarted without its delay proxy) otherwise waits for the old address forever.
    Raises KafkaException or TimeoutError."""
    metadata = admin.list_topics(timeout=timeout)
    cluster = admin.describe_cluster(request_timeout=timeout).result(timeout=timeout)
    return metadata, list(cluster.nodes)


class ConnectionTrouble:
    """What librdkafka said about its connections while a request failed: error events (a refused login, a failed TLS
    handshake) and log lines (a broker closing the connection at the first request, as a TLS listener does to a
    plaintext client). Pass `config()` into a client's settings; `cause()` names the likely reason."""

    def __init__(self) -> None:
        self.errors: list[KafkaError_] = []
        self.lines: list[str] = []
        self.logger = logging.Logger("canary.librdkafka.trouble", logging.INFO)  # not in the tree: no propagation
        self.logger.addHandler(self._Handler(self.lines))

    class _Handler(logging.Handler):
        def __init__(self, lines: list[str]):
            super().__init__(logging.INFO)
            self.lines = lines

        def emit(self, record: logging.LogRecord) -> None:
            if len(self.lines) < 200:
                self.lines.append(record.getMessage())

    def config(self) -> dict:
        return {"error_cb": self.errors.append, "logger": self.logger}

    def cause(self) -> str | None:
        for err in reversed(self.errors):
            if err.code() == KafkaError_._AUTHENTICATION:
                return f"{err.str()} (check sasl.username and sasl.password)"
            if err.code() == KafkaError_._SSL:
                return f"{err.str()} (check security.protocol and ssl.ca.location)"
        if any("in state APIVERSION_QUERY" in line and "Disconnected" in line for line in self.lines):
            return ("the brokers close the connection at the first request, as a TLS listener does with a plaintext "
                    "client: the cluster probably needs security.protocol SASL_SSL (or SSL) and its credentials")
        return None


def describe_failure(exc: KafkaException, trouble: ConnectionTrouble) -> str:
    """A failed request's error, followed by the connections' likely cause when librdkafka reported one."""
    cause = trouble.cause()
    return f"{exc.args[0]}; {cause}" if cause else str(exc.args[0])


def check(bootstrap_servers: str, expected_brokers: list[int], timeout: float = 5.0,
          client_config: dict[str, str] | None = None, expected_voters: list[int] | None = None) -> ClusterHealth:
    """One look at the cluster's metadata (and, given `expected_voters`, the controller quorum).
    Never raises for an unreachable cluster: says so in `error` (naming a refused login or a TLS failure)."""
    health = ClusterHealth(expected_brokers=sorted(expected_brokers))
    trouble = ConnectionTrouble()
    admin = None
    try:
        admin = admin_client(bootstrap_servers, {**(client_config or {}), **trouble.config()})
        metadata = admin.list_topics(timeout=timeout)
    except KafkaException as exc:
        if admin is None:  # the settings themselves, e.g. a missing password
            health.error = f"the client settings for {bootstrap_servers} are not usable: {exc.args[0].str()}"
            return health
        admin.poll(0.2)  # serves the error callbacks of the failed connections
        health.error = f"cannot read cluster metadata from {bootstrap_servers}: {describe_failure(exc, trouble)}"
        return health
    # Metadata lists only registered, unfenced brokers (KRaft), so absence means down or fenced.
    health.registered_brokers = sorted(metadata.brokers)
    for topic in sorted(metadata.topics.values(), key=lambda t: t.topic or ""):
        for part in sorted(topic.partitions.values(), key=lambda p: p.id):
            name = f"{topic.topic}-{part.id}"
            if part.leader < 0:
                health.offline_partitions.append(name)
            elif len(part.isrs) < len(part.replicas):
                health.under_replicated.append(name)
    if expected_voters and not (health.missing_brokers or health.offline_partitions):
        health.lagging_voters = lagging_voters(bootstrap_servers, expected_voters, timeout, client_config=client_config)
    return health


def lagging_voters(bootstrap_servers: str, expected_voters: list[int], timeout: float = 5.0,
                   max_lag: int = 20, client_config: dict[str, str] | None = None) -> list[int]:
    """Voters whose metadata log is more than `max_lag` records behind the quorum's high watermark
    (or absent); all of them when the quorum has no leader or cannot be described. `client_config`: librdkafka
    settings, translated for kafka-python."""

    try:
        admin = KafkaAdminClient(bootstrap_servers=bootstrap_servers, request_timeout_ms=int(timeout * 1000),
                                 client_id="kafka-canary-health", **kafka_python_settings(client_config or {}))
        try:
            quorum = admin.describe_metadata_quorum()
        finally:
            admin.close()
        part = quorum["topics"][0]["partitions"][0]
    except (KafkaError, KeyError, IndexError):
        return sorted(expected_voters)
    if part.get("leader_id", -1) < 0:
        return sorted(expected_voters)
    end = {v["replica_id"]: v["log_end_offset"] for v in part["current_voters"]}
    return sorted(v for v in expected_voters if part["high_watermark"] - end.get(v, -max_lag - 1) > max_lag)


def partitions_hosted_by(bootstrap_servers: str, broker_id: int, timeout: float = 10.0,
                         client_config: dict[str, str] | None = None) -> list[str]:
    """Partitions with a replica on `broker_id`."""
    metadata = admin_client(bootstrap_servers, client_config).list_topics(timeout=timeout)
    return sorted(f"{t.topic}-{p.id}" for t in metadata.topics.values() for p in t.partitions.values()
                  if broker_id in p.replicas)
