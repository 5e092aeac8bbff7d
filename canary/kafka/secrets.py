"""The one secret rule: which client settings are secrets, and how a secret never reaches a log, a file or a page.

A setting is secret when its name says password, secret, key material, token, credential or JAAS config
(`sasl.password`, `ssl.key.password`, `sasl.oauthbearer.client.secret`, `sasl.jaas.config`, …). Every place that
writes settings out — the probe's status, a rollout's run.json and audit log, a migration canary's result — masks
them with this rule; known secret values are also cut out of free text (an error message that quoted one).
"""

from __future__ import annotations

import json
import re
from typing import Any

_SECRET = re.compile(r"password|secret|jaas|\.pem$|key\.pem|private|token|credential", re.IGNORECASE)
MASK = "***"  # as Airflow's secrets masker writes it


def is_secret(key: str) -> bool:
    return bool(_SECRET.search(key))


def redacted(settings: dict[str, str]) -> dict[str, str]:
    """A copy safe to print or log: secret values replaced by the mask."""
    return {k: (MASK if is_secret(k) else v) for k, v in settings.items()}


def scrub(value: Any) -> Any:
    """`value` (nested dicts and lists) with the value of every secret-named key masked."""
    if isinstance(value, dict):
        return {k: (MASK if isinstance(k, str) and is_secret(k) else scrub(v)) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [scrub(v) for v in value]
    return value


def scrub_text(text: str, secrets: list[str] | tuple[str, ...]) -> str:
    """`text` (JSON or plain) with every secret value, raw or JSON-escaped, replaced by the mask."""
    for secret in secrets:
        for form in {secret, json.dumps(secret)[1:-1]}:
            if form:
                text = text.replace(form, MASK)
    return text
