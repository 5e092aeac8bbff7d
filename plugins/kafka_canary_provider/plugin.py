"""The kafka-canary Airflow plugin: the run reports (run_dir/report.html and the Spark analysis report with its
plots) served by a FastAPI app under /kafka-canary, behind Airflow's own authentication, a "Canary rollouts"
entry in the UI's navigation, and the report link of every rollout task."""

from __future__ import annotations

import html
import json
from pathlib import Path

from airflow.plugins_manager import AirflowPlugin
from fastapi import Depends, FastAPI, HTTPException
from fastapi.responses import FileResponse, HTMLResponse

from kafka_canary_provider.links import URL_PREFIX, RolloutReportLink
from kafka_canary_provider.runs import runs_root

# Only what the reports are made of is served; run.json and the observations stay private.
SERVED = {".html": "text/html", ".png": "image/png", ".svg": "image/svg+xml", ".json": "application/json"}
PRIVATE = {"run.json"}


def _authenticated():
    """Airflow's dependency that refuses a request without a valid Airflow session or token."""
    from airflow.api_fastapi.core_api.security import requires_authenticated

    return requires_authenticated()


def resolve(root: Path, run_id: str, page: str) -> Path:
    """The file `page` of run `run_id` under `root`; HTTPException 404 for anything outside the run directory,
    a file type that is not part of a report, or a missing file."""
    run = (root / run_id).resolve()
    target = (run / page).resolve()
    if root.resolve() not in run.parents or run not in target.parents:
        raise HTTPException(status_code=404, detail="no such report")
    if target.suffix not in SERVED or target.name in PRIVATE or not target.is_file():
        raise HTTPException(status_code=404, detail="no such report")
    return target


def _index(root: Path) -> str:
    rows = []
    runs = sorted((p for p in root.glob("*/run.json")), key=lambda p: p.stat().st_mtime, reverse=True)
    for path in runs[:200]:
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        run_id = html.escape(data.get("run_id", path.parent.name))
        verdict = html.escape(str((data.get("verdict") or {}).get("verdict") or "—"))
        rows.append(f'<tr><td><a href="{URL_PREFIX}/runs/{run_id}/report.html">{run_id}</a></td>'
                    f'<td>{verdict}</td><td>{html.escape(str(data.get("status")))}</td></tr>')
    return ("<!doctype html><html><head><meta charset='utf-8'><title>Canary rollouts</title></head>"
            "<body style='font:14px system-ui,sans-serif;margin:2em'><h1>Canary rollouts</h1>"
            "<table border=1 cellpadding=4 style='border-collapse:collapse'>"
            f"<tr><th>run</th><th>verdict</th><th>status</th></tr>{''.join(rows)}</table></body></html>")


def create_app() -> FastAPI:
    app = FastAPI(title="kafka-canary rollout reports", dependencies=[Depends(_authenticated())])

    @app.get("/", response_class=HTMLResponse)
    def index() -> str:
        return _index(runs_root())

    @app.get("/runs/{run_id}/{page:path}")
    def report(run_id: str, page: str) -> FileResponse:
        target = resolve(runs_root(), run_id, page)
        return FileResponse(target, media_type=SERVED[target.suffix])

    return app


class KafkaCanaryPlugin(AirflowPlugin):
    name = "kafka_canary"
    fastapi_apps = [{"app": create_app(), "url_prefix": URL_PREFIX, "name": "kafka-canary reports"}]
    external_views = [{"name": "Canary rollouts", "href": f"{URL_PREFIX}/", "destination": "nav",
                       "category": "browse", "url_route": "kafka-canary"}]
    operator_extra_links = [RolloutReportLink()]
