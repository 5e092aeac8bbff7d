"""The kafka-canary Airflow plugin: the run reports (report.html in the run storage and the Spark analysis report
with its plots) served by a FastAPI app under /kafka-canary, behind Airflow's own authentication, a "Canary rollouts"
entry in the UI's navigation, and the report link of every rollout task."""

from __future__ import annotations

import html
import json
from pathlib import Path

from airflow.plugins_manager import AirflowPlugin
from fastapi import Depends, FastAPI, HTTPException
from fastapi.responses import HTMLResponse, Response

from canary.storage import Store, StoreError
from canary.storage.store import valid_key
from kafka_canary_provider.links import URL_PREFIX, RolloutReportLink
from kafka_canary_provider.runs import runs_store

# Only what the reports are made of is served; run.json and the observations stay private.
SERVED = {".html": "text/html", ".png": "image/png", ".svg": "image/svg+xml", ".json": "application/json"}
PRIVATE = {"run.json"}


def _authenticated():
    """Airflow's dependency that refuses a request without a valid Airflow session or token."""
    from airflow.api_fastapi.core_api.security import requires_authenticated

    return requires_authenticated()


def page_key(run_id: str, page: str) -> str:
    """The storage key of `page` of run `run_id`; HTTPException 404 for anything outside the run, or a file type
    that is not part of a report."""
    try:
        key = valid_key(f"{run_id}/{page}")
    except StoreError:
        raise HTTPException(status_code=404, detail="no such report") from None
    name = key.rsplit("/", 1)[-1]
    if "/" not in key or Path(name).suffix not in SERVED or name in PRIVATE or name.startswith("."):
        raise HTTPException(status_code=404, detail="no such report")
    return key


def _index(store: Store) -> str:
    from canary.rollout.core.record import RunRecord

    rows = []
    for run, _ in sorted(store.runs(), key=lambda found: found[1], reverse=True)[:200]:
        try:
            raw = store.child(run).read("run.json")
        except (OSError, StoreError):
            continue
        try:
            record = RunRecord.load(json.loads(raw or b"{}"))
        except ValueError:  # not JSON, or not a record this version reads
            cells = ("—", "—", "run.json not readable by this kafka-canary")
        else:
            verdict = record.verdict.verdict if record.verdict else "—"
            cells = (verdict, str(record.outcome()), str(record.status))
        run_id = html.escape(run)
        rows.append(f'<tr><td><a href="{URL_PREFIX}/runs/{run_id}/report.html">{run_id}</a></td>'
                    + "".join(f"<td>{html.escape(cell)}</td>" for cell in cells) + "</tr>")
    return ("<!doctype html><html><head><meta charset='utf-8'><title>Canary rollouts</title></head>"
            "<body style='font:14px system-ui,sans-serif;margin:2em'><h1>Canary rollouts</h1>"
            "<table border=1 cellpadding=4 style='border-collapse:collapse'>"
            f"<tr><th>run</th><th>verdict</th><th>outcome</th><th>status</th></tr>{''.join(rows)}</table></body></html>")


def create_app() -> FastAPI:
    """The report pages, read from the run storage (a directory, or the object store every worker writes to: the
    API server needs no disk shared with the workers)."""
    app = FastAPI(title="kafka-canary rollout reports", dependencies=[Depends(_authenticated())])

    @app.get("/", response_class=HTMLResponse)
    def index() -> str:
        return _index(runs_store())

    @app.get("/runs/{run_id}/{page:path}")
    def report(run_id: str, page: str) -> Response:
        key = page_key(run_id, page)
        data = runs_store().read(key)
        if data is None:
            raise HTTPException(status_code=404, detail="no such report")
        return Response(content=data, media_type=SERVED[Path(key).suffix])

    return app


class KafkaCanaryPlugin(AirflowPlugin):
    name = "kafka_canary"
    fastapi_apps = [{"app": create_app(), "url_prefix": URL_PREFIX, "name": "kafka-canary reports"}]
    external_views = [{"name": "Canary rollouts", "href": f"{URL_PREFIX}/", "destination": "nav",
                       "category": "browse", "url_route": "kafka-canary"}]
    operator_extra_links = [RolloutReportLink()]
