"""Alerts: a cluster found DEGRADED, or a sweep that could not run. Each is logged, appended to
`<history root>/alerts.jsonl` (on an object store, one object per alert under `alerts.jsonl.d/`: sweeps on
several machines never lose one) and, when a webhook is configured, POSTed to it."""

from __future__ import annotations

import json
import logging
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from canary.storage import Store, open_store
from canary.sweep.config import history_root

log = logging.getLogger("canary.sweep")

WEBHOOK_ENV = "KAFKA_CANARY_ALERT_WEBHOOK"
ALERTS = "alerts.jsonl"


@dataclass(frozen=True)
class Alert:
    """What an alert says: a cluster DEGRADED, or a sweep that could not run (FAILED)."""

    cluster: str | None
    status: str
    reason: str
    sweep_id: str | None = None
    report: str | None = None
    details: dict = field(default_factory=dict)
    source: str = "kafka-canary health sweep"
    at_ms: int = field(default_factory=lambda: int(time.time() * 1000))

    def to_dict(self) -> dict:
        return asdict(self)


def send_alert(alert: Alert, root: str | Path | Store | None = None, webhook_url: str | None = None,
               timeout: float = 10.0) -> dict:
    """Logs one alert line, appends the alert to `<root>/alerts.jsonl` and, when `webhook_url` is given, POSTs
    it there as JSON. The webhook URL (it often carries a token) is never logged; a webhook failure is logged
    and reported, not raised: the alert is in the log and the file either way."""
    log.warning("ALERT kafka-canary %s: cluster %s: %s%s", alert.status, alert.cluster, alert.reason,
                f" (report {alert.report})" if alert.report else "")
    store = root if isinstance(root, Store) else open_store(root or history_root())
    store.append(ALERTS, json.dumps(alert.to_dict(), default=str).encode())
    path = store.where(ALERTS)
    webhook = _post(webhook_url, alert, timeout) if webhook_url else "not configured"
    if webhook_url and webhook != "sent":
        log.warning("the alert webhook did not take the alert (%s); it is in %s", webhook, path)
    return {"alerts_file": str(path), "webhook": webhook}


def _post(webhook_url: str, alert: Alert, timeout: float) -> str:
    """POSTs the alert; returns `sent`, or why not, without the URL."""
    import requests

    try:
        response = requests.post(webhook_url, json=alert.to_dict(), timeout=timeout)
    except requests.RequestException as exc:  # its message names the URL: only the kind is logged
        return f"failed: {type(exc).__name__}"
    return "sent" if response.ok else f"refused: HTTP {response.status_code}"
