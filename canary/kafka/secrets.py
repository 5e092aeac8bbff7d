"""The one secret rule: which client settings are secrets, and how a secret never reaches a log, a file or a page.

A setting is secret when its name says password, secret, key material, token, credential or JAAS config
(`sasl.password`, `ssl.key.password`, `sasl.oauthbearer.client.secret`, `sasl.jaas.config`, …). Every place that
writes settings out — the probe's status, a rollout's run.json and audit log, a migration canary's result — masks
them with this rule; known secret values are also cut out of free text (an error message that quoted one).

The URL rule: a URL (or a bootstrap server) carrying credentials in its user part (`user:password@host`) is
refused wherever kafka-canary accepts one, with an error that names where credentials go instead and never
quotes them; `redact_urls` masks any that still reach free text (`user:***@`).
"""

from __future__ import annotations

import json
import re
from typing import Any

from canary.errors import CanaryError

_SECRET = re.compile(r"password|secret|jaas|\.pem$|key\.pem|private|token|credential|oauthbearer\.config",
                     re.IGNORECASE)
# The user part of a URL in free text: scheme://USER[:PASSWORD]@ (USER kept, the rest masked).
_URL_USERINFO = re.compile(r"\b([a-z][a-z0-9+.-]*://)([^\s/?#@:]*)(:[^\s/?#@]*)?@", re.IGNORECASE)
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


class CredentialsInUrl(CanaryError, ValueError):
    """A URL carries credentials; the message says where they go instead and never quotes them."""


def has_credentials(url: str) -> bool:
    """True when `url` (`scheme://…` or a bare `host:port`) has a user part that is a credential: a password, or
    any user part but an SSH login name (`ssh://user@host`, whose keys authenticate)."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        scheme, rest = "", url
    authority = re.split(r"[/?#]", rest, maxsplit=1)[0]
    userinfo, at, _ = authority.rpartition("@")
    if not at:
        return False
    return ":" in userinfo or scheme.lower() != "ssh"


def refuse_credentials(url: str, instead: str, where: str = "") -> str:
    """`url` unchanged, or CredentialsInUrl naming `where` the URL was given and `instead`, where credentials go.
    For a list (bootstrap servers) each comma-separated item is checked."""
    if any(has_credentials(item.strip()) for item in url.split(",")):
        raise CredentialsInUrl(f"{where + ': ' if where else ''}must not carry credentials (user:password@ in the "
                               f"URL, not repeated here); {instead}")
    return url


def redact_urls(text: str) -> str:
    """`text` with the credentials of every URL in it masked: `scheme://user:***@` (a user part without a password,
    such as an access key id, `scheme://***@`; an SSH login name stays)."""
    def mask(m: re.Match) -> str:
        scheme, user, password = m.groups()
        if password is None:
            return m.group(0) if scheme.lower() == "ssh://" else f"{scheme}{MASK}@"
        return f"{scheme}{user}:{MASK}@"

    return _URL_USERINFO.sub(mask, text)
