"""Probe settings: one typed `ProbeConfig`, built from a properties/JSON file, env vars and CLI flags.

Client settings are librdkafka properties passed through untouched (SASL PLAIN/SCRAM, TLS, …):

- a config file: `key=value` lines (Java properties style, `#` comments) or a JSON object;
  keys starting with `probe.` set probe options (`probe.rate`, `probe.topic`, …), all others
  are client settings;
- env vars `KAFKA_CANARY_CLIENT_<KEY>` (key upper-cased, dots as underscores, e.g.
  `KAFKA_CANARY_CLIENT_SASL_PASSWORD`) add or override client settings.

Secrets are never printed: `redacted()` masks every setting whose name says password, secret,
key material or JAAS config.
"""

from __future__ import annotations

import math
import os
import socket
import uuid
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from canary.errors import ConfigError
from canary.fields import parse_duration
from canary.kafka.secrets import redacted, refuse_credentials
from canary.kafka.settings import client_settings_from_env, read_settings_file

# Keys a probe manages itself; a passthrough value for them would break the probe's guarantees.
_MANAGED = {"bootstrap.servers", "acks", "group.id", "enable.auto.commit", "auto.offset.reset"}


@dataclass(frozen=True)
class ProbeConfig:
    bootstrap_servers: str
    topic: str = "__kafka_canary"
    observations_topic: str | None = None      # None: canary.observations.OBSERVATIONS_TOPIC; "" disables
    observations_file: str | None = None       # JSONL, one observation per line
    rate: float = 10.0                         # messages per second per partition
    message_size: int = 200                    # bytes of the JSON value, padded
    duration: float | None = None              # seconds; None runs until stopped
    rtt_sla: float = 30.0                      # seconds: acked but not received by then = lost
    message_timeout: float = 10.0              # seconds librdkafka retries one message before a produce error
    metadata_interval: float = 5.0             # seconds between leader/rack refreshes
    reconcile_interval: float = 30.0           # seconds between topic reconciliations
    connection_interval: float = 15.0          # seconds between broker connection checks
    broker_metrics_interval: float = 5.0       # seconds between readings of the brokers' metrics (when given)
    status_window: float = 60.0                # seconds summarised by /status
    http_port: int | None = None               # None: no HTTP server; 0: any free port
    http_host: str = "0.0.0.0"
    reconcile: bool = True                     # False: use the topic as it is (no admin rights needed)
    # seconds a missing broker counts as restarting or down, not removed (its replicas stay; the probe keeps
    # producing to its partition and sees the outage); a broker missing longer is taken as removed (scale-down)
    away_grace: float = 600.0
    # Only the partitions these brokers lead are probed (empty: all). A broker rollout's window probes its canary and
    # control brokers alone when it has a control: fresh judged against fresh (canary.rollout.broker.control).
    leaders: tuple[int, ...] = ()
    # The brokers of the canary lane, in place of the canary marker (None: the marker decides). A promotion's look
    # between waves puts the promoted brokers, which no longer carry the marker, against those not promoted yet.
    canary_brokers: tuple[int, ...] | None = None
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    producer_id: str = field(default_factory=lambda: f"{socket.gethostname()}-{os.getpid()}")
    client: dict[str, str] = field(default_factory=dict)  # librdkafka passthrough

    def __post_init__(self) -> None:
        if not self.bootstrap_servers:
            raise ConfigError("bootstrap servers are missing: pass --bootstrap-servers host:port[,host:port]")
        refuse_credentials(self.bootstrap_servers, "put SASL credentials in sasl.username and sasl.password (--config "
                                                   "or KAFKA_CANARY_CLIENT_SASL_PASSWORD)", where="bootstrap servers")
        if not (self.rate > 0 and math.isfinite(self.rate)):  # NaN compares false: refused too
            raise ConfigError(f"rate must be > 0 messages/s per partition, got {self.rate}")
        if self.message_size < 0 or self.message_size > 900_000:
            raise ConfigError(f"message size must be 0..900000 bytes, got {self.message_size}")
        if self.rtt_sla <= 0 or self.message_timeout <= 0 or self.broker_metrics_interval <= 0:
            raise ConfigError("rtt SLA, message timeout and broker metrics interval must be positive seconds")
        for name, ids in (("leaders", self.leaders), ("canary brokers", self.canary_brokers or ())):
            if any(not isinstance(b, int) or isinstance(b, bool) or b < 0 for b in ids):
                raise ConfigError(f"{name} must be broker ids (integers >= 0), got {list(ids)}")
        managed = sorted(set(self.client) & _MANAGED)
        if managed:
            raise ConfigError(f"client settings {managed} are managed by the probe; remove them from the config")

    def describe(self) -> dict:
        """JSON-able, secrets redacted."""
        data = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "client"}
        return data | {"client": redacted(self.client)}


_PROBE_KEYS = {f.name for f in fields(ProbeConfig)} - {"client", "bootstrap_servers"}


def load(bootstrap_servers: str | None, config_file: str | Path | None = None,
         environ: dict[str, str] | None = None, **overrides) -> ProbeConfig:
    """File, then env, then explicit overrides (CLI flags; None means not given)."""
    settings = read_settings_file(config_file) if config_file else {}
    probe_opts: dict[str, Any] = {}
    client: dict[str, str] = {}
    for key, value in settings.items():
        if key.startswith("probe."):
            name = key[len("probe."):].replace(".", "_").replace("-", "_")
            if name not in _PROBE_KEYS:
                raise ConfigError(f"unknown probe option {key!r}; known: {sorted('probe.' + k for k in _PROBE_KEYS)}")
            probe_opts[name] = value
        else:
            client[key] = value
    client |= client_settings_from_env(environ)
    bootstrap = bootstrap_servers or client.pop("bootstrap.servers", None)
    client.pop("bootstrap.servers", None)
    typed = {f.name: str(f.type) for f in fields(ProbeConfig)}  # annotations are strings (__future__)
    for name, given in list(probe_opts.items()):
        probe_opts[name] = _coerce(name, typed[name], given)
    probe_opts |= {k: v for k, v in overrides.items() if v is not None}
    return ProbeConfig(bootstrap_servers=bootstrap or "", client=client, **probe_opts)


def _coerce(name: str, type_name: str, value: object) -> object:
    if not isinstance(value, str):
        return value
    try:
        if name in ("duration", "rtt_sla", "message_timeout", "metadata_interval", "reconcile_interval",
                    "connection_interval", "status_window", "broker_metrics_interval"):
            return parse_duration(value)
        if name == "leaders":
            return tuple(int(b) for b in value.replace(" ", "").split(",") if b)
        if "bool" in type_name:
            return value.lower() in ("1", "true", "yes", "on")
        if "int" in type_name:
            return int(value)
        if "float" in type_name:
            return float(value)
    except ValueError as exc:
        raise ConfigError(f"probe.{name}={value!r} is not a valid {type_name}") from exc
    return value


