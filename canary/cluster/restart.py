"""What a node restart may change: its config overrides, rack and client delay (and its version, which
the distribution check covers). Checked in full before the node stops, applied to its state while it is
down.
"""

from __future__ import annotations

import math

from canary.cluster import node_config
from canary.cluster.state import NodeState
from canary.errors import ClusterError


class _Unchanged:
    """The default of `restart_node`'s keyword parameters whose None has a meaning of its own."""

    def __repr__(self) -> str:
        return "UNCHANGED"


UNCHANGED = _Unchanged()


def check_restart(node: NodeState, changes: dict[str, str | None], rack: str | None | _Unchanged,
                  client_delay_ms: float | None | _Unchanged) -> float:
    """The client delay the node will have after the restart; ClusterError for a change it cannot take."""
    node_config.validate_overrides({key: value for key, value in changes.items() if value is not None})
    if node.role == "controller" and changes:
        raise ClusterError("config overrides apply to brokers; controllers take the cluster defaults")
    if not isinstance(rack, _Unchanged):
        if node.role == "controller":
            raise ClusterError(f"node {node.node_id} is a controller; a rack (broker.rack) applies to brokers only")
        if rack is not None and (not isinstance(rack, str) or not rack.strip() or rack.strip() != rack):
            raise ClusterError(f"rack {rack!r} is not a rack name; pass a non-empty name without "
                               f"surrounding spaces, or None to remove the rack")
    delay = node.client_delay_ms if isinstance(client_delay_ms, _Unchanged) else _client_delay(client_delay_ms)
    if not isinstance(client_delay_ms, _Unchanged) and node.role == "controller":
        raise ClusterError(f"node {node.node_id} is a controller; a client delay applies to a broker's client "
                           f"listener only")
    if delay > 0 and not node.replication_port:
        raise ClusterError(f"broker {node.node_id} has no separate replication listener (its cluster was started by "
                           f"an older kafka-canary), so a delay proxy would slow replication too; start a new "
                           f"cluster to inject a client delay")
    return delay


def apply_restart(node: NodeState, version: str, changes: dict[str, str | None], rack: str | None | _Unchanged,
                  delay: float) -> None:
    """Sets the checked changes on the (stopped) node's state; a config value of None removes that override."""
    node.version = version
    if not isinstance(rack, _Unchanged):
        node.rack = rack
    node.client_delay_ms = delay
    if delay == 0:
        node.proxy_port = None
    for key, value in changes.items():
        if value is None:
            node.config.pop(key, None)
        else:
            node.config[key] = value


def _client_delay(value: float | None) -> float:
    """A `client_delay_ms` argument as a number of ms >= 0 (None means 0), or ClusterError."""
    if value is None:
        return 0.0
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise ClusterError(f"client delay {value!r} is not a delay; pass milliseconds >= 0 (0 or None removes "
                           f"the delay proxy)")
    return float(value)
