"""KafkaCanaryHook: an Airflow Connection → the `cluster` section of a rollout spec.

The connection (conn type `kafka_canary`) keeps everything in its extras except the secret:

    {"deployer": "local", "dir": "/path/to/cluster",
     "client": {"security.protocol": "SASL_SSL", "sasl.mechanisms": "PLAIN", "sasl.username": "ops"}}

The password field, when set, becomes the librdkafka setting `sasl.password`; it is never logged. The connection
form (those extras as fields, the password relabelled) is declared in the provider info (get_provider_info.py), where
Airflow reads it without importing the hook.
"""

from __future__ import annotations

import json
from typing import Any

from airflow.sdk import BaseHook

from canary.kafka.secrets import redacted


class KafkaCanaryHook(BaseHook):
    """Reads a kafka-canary connection. `cluster_section()` gives the rollout spec's `cluster` mapping;
    `test_connection()` reads the cluster's metadata."""

    conn_name_attr = "kafka_canary_conn_id"
    default_conn_name = "kafka_canary_default"
    conn_type = "kafka_canary"
    hook_name = "Kafka canary cluster"

    def __init__(self, kafka_canary_conn_id: str = default_conn_name, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.kafka_canary_conn_id = kafka_canary_conn_id

    def cluster_section(self) -> dict[str, Any]:
        """The cluster section (deployer; dir, docker or command; client) from the connection; raises ValueError
        naming every bad extra. The extras are the rollout spec's cluster section (one model,
        canary.rollout.core.spec.ClusterSection); the password becomes the client's sasl.password."""
        from pydantic import ValidationError

        from canary.fields import problems
        from canary.rollout.core.spec import ClusterSection

        conn = self.get_connection(self.kafka_canary_conn_id)
        where = f"connection {self.kafka_canary_conn_id}"
        # extra_dejson would turn unreadable extras into {} (and a rollout would fail later, naming the wrong
        # thing: a missing dir), so they are checked first; it is still what reads them, as it masks secrets.
        try:
            json.loads(conn.extra or "{}")
        except ValueError as exc:
            raise ValueError(f"{where}: the extras are not valid JSON ({exc}); write them as a JSON object, e.g. "
                             f'{{"deployer": "local", "dir": "/path/to/cluster"}}') from None
        extras = conn.extra_dejson
        if not isinstance(extras, dict):
            raise ValueError(f"{where}: the extras must be a JSON object with deployer, dir, client; got "
                             f"{type(extras).__name__}")
        try:
            cluster = ClusterSection.model_validate(extras)
        except ValidationError as exc:
            lines = problems(exc, ClusterSection)
            raise ValueError(f"{where}: " + "; ".join(f"extras.{line}" for line in lines)) from None
        client = dict(cluster.client)
        if conn.password:
            client["sasl.password"] = conn.password
        section: dict[str, Any] = cluster.model_dump(exclude_none=True) | {"client": client}
        where = {"local": section["dir"], "docker": section.get("docker"),
                 "command": {"brokers": (section.get("command") or {}).get("brokers")}}[section["deployer"]]
        self.log.info("connection %s: deployer %s, %s, client settings %s", self.kafka_canary_conn_id,
                      section["deployer"], where, redacted(client))
        return section

    def bootstrap_servers(self, section: dict[str, Any] | None = None) -> str:
        from canary.rollout.core.spec import ClusterSection

        section = section or self.cluster_section()
        return ClusterSection.model_validate(section).open_deployer().bootstrap_servers

    def test_connection(self) -> tuple[bool, str]:
        """(True, "...") when the cluster's metadata can be read and every broker is healthy."""
        from canary.kafka import health
        from canary.rollout.core.spec import ClusterSection

        try:
            section = self.cluster_section()
            deployer = ClusterSection.model_validate(section).open_deployer()
            brokers = [b.broker_id for b in deployer.brokers()]
            seen = health.check(deployer.bootstrap_servers, brokers, client_config=section["client"])
        except Exception as exc:  # the UI shows the message; any failure is "not working"
            return False, str(exc)
        if seen.error:
            return False, seen.error
        if not seen.healthy:
            return True, f"connected to {deployer.bootstrap_servers}, but the cluster is not healthy: {seen.reason()}"
        return True, f"connected to {deployer.bootstrap_servers}: {len(brokers)} brokers, healthy"
