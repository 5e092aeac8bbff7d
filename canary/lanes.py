"""The canary marker convention (DESIGN.md §2), in one place.

Upstream Kafka has no broker `pod` field yet (the KIP's marker), so the marker travels in
metadata every client can read: `broker.rack`. A broker is a **canary broker** when its rack

- equals the marker (`canary-broker`), or
- ends with `:<marker>` (keeps a real rack name in front, e.g. `eu-west-1a:canary-broker`).

Every other rack, and no rack at all, is the baseline lane. A partition's lane is its leader's
lane. Change the convention here (or set `KAFKA_CANARY_MARKER` for another marker value);
nothing else in the code parses racks.

A canary client carries the same marker in its `client.id` or `group.instance.id`
(`client_lane`), as a `-`, `.`, `_` or `:` separated token.
"""

from __future__ import annotations

import os
import re

from canary.observations import Lane

DEFAULT_MARKER = "canary-broker"
RACK_SEPARATOR = ":"


def marker() -> str:
    return os.environ.get("KAFKA_CANARY_MARKER") or DEFAULT_MARKER


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
    """'canary' when a client id (or group.instance.id) carries the marker as a token."""
    mark = canary_marker or marker()
    if not client_id:
        return "baseline"
    tokens = re.split(r"[-._:]", client_id)
    mark_tokens = re.split(r"[-._:]", mark)
    n = len(mark_tokens)
    return "canary" if any(tokens[i:i + n] == mark_tokens for i in range(len(tokens) - n + 1)) else "baseline"
