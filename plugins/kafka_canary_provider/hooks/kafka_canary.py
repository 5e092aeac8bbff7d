"""KafkaCanaryHook: an Airflow Connection → the `cluster` section of a rollout spec.

The connection (conn type `kafka_canary`) keeps everything in its extras except the secret:

    {"deployer": "local", "dir": "/path/to/cluster",
     "client": {"security.protocol": "SASL_SSL", "sasl.mechanisms": "PLAIN", "sasl.username": "ops"}}

The password field, when set, becomes the librdkafka setting `sasl.password`; it is never logged.
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import BaseHook

from canary.probe.config import redacted


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

    @classmethod
    def get_ui_field_behaviour(cls) -> dict[str, Any]:
        return {
            "hidden_fields": ["schema", "port", "host", "login"],
            "relabeling": {"password": "SASL password (becomes sasl.password)"},
            "placeholders": {"extra": '{"deployer": "local", "dir": "/path/to/cluster", '
                                      '"client": {"security.protocol": "PLAINTEXT"}}'},
        }

    def cluster_section(self) -> dict[str, Any]:
        """{"deployer", "dir", "client"} from the connection; raises ValueError naming a bad extra."""
        conn = self.get_connection(self.kafka_canary_conn_id)
        extras = conn.extra_dejson or {}
        unknown = sorted(set(extras) - {"deployer", "dir", "client"})
        if unknown:
            raise ValueError(f"connection {self.kafka_canary_conn_id}: unknown extras {unknown}; "
                             f"known are deployer, dir, client")
        client = extras.get("client") or {}
        if not isinstance(client, dict):
            raise ValueError(f"connection {self.kafka_canary_conn_id}: extras.client must be a mapping of "
                             f"librdkafka settings, got {type(client).__name__}")
        client = {str(k): str(v) for k, v in client.items()}
        if conn.password:
            client["sasl.password"] = conn.password
        section: dict[str, Any] = {"deployer": extras.get("deployer", "local"), "client": client}
        if extras.get("dir") is not None:
            section["dir"] = str(extras["dir"])
        self.log.info("connection %s: deployer %s, dir %s, client settings %s", self.kafka_canary_conn_id,
                      section["deployer"], section.get("dir"), redacted(client))
        return section

    def bootstrap_servers(self, section: dict[str, Any] | None = None) -> str:
        from canary.rollout.deployer import open_deployer

        section = section or self.cluster_section()
        return open_deployer(section["deployer"], section.get("dir", "")).bootstrap_servers

    def test_connection(self) -> tuple[bool, str]:
        """(True, "...") when the cluster's metadata can be read and every broker is healthy."""
        from canary.cluster import health
        from canary.rollout.deployer import open_deployer

        try:
            section = self.cluster_section()
            deployer = open_deployer(section["deployer"], section.get("dir", ""))
            brokers = [b.broker_id for b in deployer.brokers()]
            seen = health.check(deployer.bootstrap_servers, brokers, client_config=section["client"])
        except Exception as exc:  # the UI shows the message; any failure is "not working"
            return False, str(exc)
        if seen.error:
            return False, seen.error
        if not seen.healthy:
            return True, f"connected to {deployer.bootstrap_servers}, but the cluster is not healthy: {seen.reason()}"
        return True, f"connected to {deployer.bootstrap_servers}: {len(brokers)} brokers, healthy"
