"""A running broker's own check of config values: a validate-only AlterConfigs (KIP-339) per key, which parses the
value with the broker's definitions and changes nothing. Only dynamic keys can be checked so: for a static one the
broker answers that it cannot be updated dynamically, whatever the value (canary.cluster.config_definitions checks
those against the release's definitions), and a thread count more than double or less than half the current one is
refused as a live change only (a restart takes it): neither is a refusal of the value."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from confluent_kafka import KafkaException
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from canary.errors import ClusterError
from canary.kafka.clients import admin_client

STATIC = "Cannot update these configs dynamically"
# A live change of a thread pool may at most double or halve it; a restart takes any valid count.
LIVE_ONLY = "the current value"


@dataclass
class BrokerCheck:
    refused: dict[str, str] = field(default_factory=dict)  # key -> the broker's own message
    static: list[str] = field(default_factory=list)        # keys it could not check: static configs, and values
                                                           # refused only as a live change (a thread count's step)


def broker_check(bootstrap_servers: str, client: Mapping[str, object] | None, broker_id: int,
                 config: Mapping[str, str], timeout: float = 15.0) -> BrokerCheck:
    """Each key=value of `config` checked by broker `broker_id` (one request a key: one refused key fails its whole
    request, and each gets its own answer). Nothing is changed."""
    admin = admin_client(bootstrap_servers, client)
    result = BrokerCheck()
    for key, value in sorted(config.items()):
        resource = ConfigResource(ResourceType.BROKER, str(broker_id), incremental_configs=[
            ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET)])
        try:
            admin.incremental_alter_configs([resource], validate_only=True, request_timeout=timeout)[
                resource].result(timeout=timeout)
        except KafkaException as exc:
            error = exc.args[0]
            message = error.str() if hasattr(error, "str") else str(error)
            if message.startswith(STATIC) or LIVE_ONLY in message:
                result.static.append(key)
            elif hasattr(error, "name") and error.name() in ("INVALID_REQUEST", "INVALID_CONFIG"):
                result.refused[key] = message
            else:
                raise ClusterError(f"broker {broker_id} could not check config {key}: {message}") from None
    return result
