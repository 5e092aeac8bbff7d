"""What every Kafka client of ours starts from: the producer defaults, the quiet librdkafka logger, the admin
client."""

from __future__ import annotations

import logging

from confluent_kafka.admin import AdminClient

# librdkafka's own log lines (connection refused while brokers start, retries) go here, not to
# stderr; the callers report failures themselves.
QUIET_LOGGER = logging.getLogger("canary.librdkafka")
QUIET_LOGGER.setLevel(logging.CRITICAL)

# A broker works through one request per connection at a time: it mutes the connection until the response
# is sent, so with acks=all each produce request waits a whole replication round behind the ones before it.
# librdkafka's default (a million requests in flight) ships every small batch as its own request and that
# queue grows without bound: 1,000 msg/s on the local 3-broker cluster gave an ack p50 of 4.2 s. Five, the
# Java client's default, keeps the messages that arrive meanwhile together for the next request: p50 15 ms,
# and 3,000 msg/s at 17 ms (bench/probe_bench.py has the probe's figures).
PRODUCER_DEFAULTS: dict[str, int | str] = {"max.in.flight.requests.per.connection": 5}


def admin_client(bootstrap_servers: str, extra: dict[str, str] | None = None) -> AdminClient:
    """An admin client with a bounded socket timeout and the quiet logger; `extra`: client settings (security)."""
    return AdminClient({"bootstrap.servers": bootstrap_servers, "socket.timeout.ms": 5000,
                        "logger": QUIET_LOGGER, **(extra or {})})
