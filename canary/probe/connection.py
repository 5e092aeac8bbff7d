"""Connection checks: a timed, fresh client connection to each broker on its own (TCP, TLS and
SASL as configured, then a metadata request), the way a new client would connect."""

from __future__ import annotations

import time
from dataclasses import dataclass

from confluent_kafka import KafkaException

from canary.kafka.clients import admin_client


@dataclass(frozen=True)
class ConnectionCheck:
    broker: int
    address: str
    ok: bool
    latency_ms: float | None
    error: str | None = None


def check_broker(broker: int, address: str, client: dict[str, str] | None = None,
                 timeout: float = 5.0) -> ConnectionCheck:
    """Connects to `address` only and asks for metadata; never raises."""
    started = time.perf_counter()
    admin = admin_client(address, {"socket.timeout.ms": int(timeout * 1000), **(client or {})})
    try:
        # With only `address` known, the first metadata request can only go there.
        admin.list_topics(timeout=timeout)
    except KafkaException as exc:
        return ConnectionCheck(broker, address, False, None, str(exc.args[0]))
    latency = (time.perf_counter() - started) * 1000
    return ConnectionCheck(broker, address, True, round(latency, 3))
