"""Client settings: librdkafka properties passed through untouched (SASL PLAIN/SCRAM, TLS, …), from a settings
file and from `KAFKA_CANARY_CLIENT_<KEY>` environment variables (key upper-cased, dots as underscores, e.g.
`KAFKA_CANARY_CLIENT_SASL_PASSWORD`), and their translation for kafka-python (the admin calls librdkafka lacks)."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

from canary.errors import CanaryError

ENV_PREFIX = "KAFKA_CANARY_CLIENT_"


class ConfigError(CanaryError):
    """Settings that cannot be used as given."""


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
    env: Mapping[str, str] = os.environ if environ is None else environ
    return {k[len(ENV_PREFIX):].lower().replace("_", "."): v for k, v in env.items() if k.startswith(ENV_PREFIX)}


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
