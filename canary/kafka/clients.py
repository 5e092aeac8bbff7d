"""What every Kafka client of ours starts from: the producer defaults, the quiet librdkafka logger, the admin
client."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from confluent_kafka import Message
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


def admin_client(bootstrap_servers: str, extra: Mapping[str, object] | None = None) -> AdminClient:
    """An admin client with a bounded socket timeout and the quiet logger; `extra`: client settings (security,
    timeouts) that override the defaults."""
    # Any: the settings hold a logger object besides the strings and numbers (the stub types only those).
    config: dict[str, Any] = {"bootstrap.servers": bootstrap_servers, "socket.timeout.ms": 5000,
                              "logger": QUIET_LOGGER, **(extra or {})}
    return AdminClient(config)


def position(msg: Message) -> tuple[str, int, int]:
    """The topic, partition and offset of a consumed message that is not an error. The client sets all three on
    every such message; its types allow None for the error events a poll returns too."""
    topic, partition, offset = msg.topic(), msg.partition(), msg.offset()
    if topic is None or partition is None or offset is None:
        raise ValueError(f"a consumed message without a topic, partition or offset (error: {msg.error()})")
    return topic, partition, offset
