"""The canary marker convention (docs/design.md), in one place.

Upstream Kafka has no broker `pod` field yet (the KIP's marker), so the marker travels in
metadata every client can read: `broker.rack`. A broker is a **canary broker** when its rack

- equals the marker (`canary-broker`), or
- ends with `:<marker>` (keeps a real rack name in front, e.g. `eu-west-1a:canary-broker`).

Every other rack, and no rack at all, is the baseline lane. A partition's lane is its leader's
lane. Change the convention here (or set `KAFKA_CANARY_MARKER` for another marker value);
nothing else in the code parses racks.

A **canary client** (a producer or consumer instance of a service) carries the client marker,
`canary` by default (`KAFKA_CANARY_CLIENT_MARKER` changes it), in its `client.id` or
`group.instance.id` as a `-`, `.`, `_` or `:` separated token: `orders-canary-1`,
`billing.canary`. The KIP's own words: service owners "encode canary into the clientId or
groupInstanceId". A marker of several tokens (`canary-broker`) must appear as consecutive tokens.
`canary_client_id` marks an id, `config_lane` reads a client's settings.

A record a canary client wrote carries the header `kafka-canary-lane: canary` (LaneProducer in the canary lane):
a canary consumer tells its own lane's output from the fleet's records by it (canary.clients.consumer), and an
audit after a rollback finds what a rolled-back version wrote.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

from canary.kafka.settings import CLIENT_MARKER_ENV
from canary.observations import Lane

DEFAULT_MARKER = "canary-broker"
DEFAULT_CLIENT_MARKER = "canary"
RACK_SEPARATOR = ":"
TOKEN_SEPARATORS = r"[-._:]"
# The client settings that may carry the client marker, in the order they are read.
CLIENT_ID_KEYS = ("client.id", "group.instance.id")
LANE_HEADER = "kafka-canary-lane"
CANARY_HEADER_VALUE = b"canary"


def marker() -> str:
    return os.environ.get("KAFKA_CANARY_MARKER") or DEFAULT_MARKER


def client_marker() -> str:
    return os.environ.get(CLIENT_MARKER_ENV) or DEFAULT_CLIENT_MARKER


def broker_lane(rack: str | None, canary_marker: str | None = None) -> Lane:
    """'canary' when `rack` carries the canary marker, else 'baseline'."""
    mark = canary_marker or marker()
    if not rack:
        return "baseline"
    rack = rack.strip()
    return "canary" if rack == mark or rack.endswith(RACK_SEPARATOR + mark) else "baseline"


def real_rack(rack: str | None, canary_marker: str | None = None) -> str | None:
    """The failure-domain part of a rack, without the marker: replica spreading uses this, so
    moving a broker into the canary lane does not change where replicas may go."""
    mark = canary_marker or marker()
    if not rack:
        return None
    if rack == mark:
        return None
    suffix = RACK_SEPARATOR + mark
    return rack[: -len(suffix)] if rack.endswith(suffix) else rack


def canary_rack(rack: str | None, canary_marker: str | None = None) -> str:
    """The rack value that marks a broker in `rack` as canary (inverse of `real_rack`)."""
    mark = canary_marker or marker()
    base = real_rack(rack, mark)
    return f"{base}{RACK_SEPARATOR}{mark}" if base else mark


def client_lane(client_id: str | None, canary_marker: str | None = None) -> Lane:
    """'canary' when a client id (or group.instance.id) carries the client marker as a token."""
    mark = canary_marker or client_marker()
    if not client_id:
        return "baseline"
    tokens = re.split(TOKEN_SEPARATORS, client_id)
    mark_tokens = re.split(TOKEN_SEPARATORS, mark)
    n = len(mark_tokens)
    return "canary" if any(tokens[i:i + n] == mark_tokens for i in range(len(tokens) - n + 1)) else "baseline"


def config_lane(config: Mapping[str, object], canary_marker: str | None = None) -> Lane:
    """A client's lane from its librdkafka settings: 'canary' when `client.id` or `group.instance.id`
    carries the client marker."""
    values = (config.get(key) for key in CLIENT_ID_KEYS)
    return "canary" if any(isinstance(v, str) and client_lane(v, canary_marker) == "canary" for v in values) \
        else "baseline"


def canary_client_id(client_id: str, canary_marker: str | None = None) -> str:
    """`client_id` marked as a canary client (`orders-1` -> `orders-1-canary`); unchanged when already marked."""
    mark = canary_marker or client_marker()
    return client_id if client_lane(client_id, mark) == "canary" else f"{client_id}-{mark}" if client_id else mark


def canary_written(headers: object) -> bool:
    """Whether a record's headers (confluent_kafka's list of (key, value) pairs, or None) say a canary client wrote
    it."""
    return isinstance(headers, list) and any(
        key == LANE_HEADER and value == CANARY_HEADER_VALUE for key, value in headers)
