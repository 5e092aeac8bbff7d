"""Client settings: librdkafka properties passed through untouched (SASL PLAIN/SCRAM, TLS, …), from a settings
file and from `KAFKA_CANARY_CLIENT_<KEY>` environment variables (key upper-cased, dots as underscores, e.g.
`KAFKA_CANARY_CLIENT_SASL_PASSWORD`), and their translation for kafka-python (the admin calls librdkafka lacks)."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

from canary.errors import ConfigError

ENV_PREFIX = "KAFKA_CANARY_CLIENT_"
# The project's own variables that share the prefix: never client settings.
CLIENT_MARKER_ENV = "KAFKA_CANARY_CLIENT_MARKER"   # the client lane's token (canary.lanes)
OWN_VARIABLES = frozenset({CLIENT_MARKER_ENV})


def read_settings_file(path: str | Path) -> dict[str, str]:
    """A properties file (`key=value`, `#`/`!` comments) or a JSON object -> flat dict of strings."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from exc
    if text.lstrip().startswith("{"):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"config file {path} is not valid JSON: {exc.msg} at line {exc.lineno}") from exc
        return {str(k): str(v).lower() if isinstance(v, bool) else str(v) for k, v in data.items()}
    result = {}
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line[0] in "#!":
            continue
        key, sep, value = line.partition("=")
        if not sep:
            key, sep, value = line.partition(":")
        if not sep or not key.strip():
            raise ConfigError(f"{path}:{number}: not key=value")
        result[key.strip()] = value.strip()
    return result


def client_settings_from_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The client settings of `KAFKA_CANARY_CLIENT_<KEY>` variables (not the project's own, OWN_VARIABLES).
    ConfigError for a variable that names no setting (`KAFKA_CANARY_CLIENT_=x`)."""
    env: Mapping[str, str] = os.environ if environ is None else environ
    settings = {}
    for name, value in env.items():
        if not name.startswith(ENV_PREFIX) or name in OWN_VARIABLES:
            continue
        key = name[len(ENV_PREFIX):].lower().replace("_", ".")
        if not key.strip("."):
            raise ConfigError(f"environment variable {name!r} names no client setting: write {ENV_PREFIX}<KEY>, e.g. "
                              f"{ENV_PREFIX}SASL_MECHANISM for sasl.mechanism, or unset it")
        settings[key] = value
    return settings


def kafka_python_settings(client: dict[str, str]) -> dict[str, object]:
    """The librdkafka security settings translated for kafka-python (features, reassignments, the quorum)."""
    mapping = {
        "security.protocol": "security_protocol", "sasl.mechanism": "sasl_mechanism",
        "sasl.mechanisms": "sasl_mechanism", "sasl.username": "sasl_plain_username",
        "sasl.password": "sasl_plain_password", "ssl.ca.location": "ssl_cafile",
        "ssl.certificate.location": "ssl_certfile", "ssl.key.location": "ssl_keyfile",
        "ssl.key.password": "ssl_password",
    }
    result: dict[str, object] = {mapping[k]: v for k, v in client.items() if k in mapping}
    for key in ("security_protocol", "sasl_mechanism"):  # librdkafka takes sasl_ssl, kafka-python only SASL_SSL
        value = result.get(key)
        if isinstance(value, str):
            result[key] = value.upper()
    if (client.get("enable.ssl.certificate.verification", "true").lower() == "false"
            or client.get("ssl.endpoint.identification.algorithm", "https").lower() == "none"):
        result["ssl_check_hostname"] = False
    return result
