"""The kafka-canary Airflow plugin: the run reports (report.html in the run storage and the Spark analysis report
with its plots) and the health sweeps' reports (in the sweep history) served by a FastAPI app under /kafka-canary,
behind Airflow's own authentication; a "Canary rollouts" entry in the UI's navigation (the runs index), a "Canary
report" tab on every DAG run's and task instance's page, a "Canary promotion" tab on every DAG run's page (pause
the promotion before its next wave, resume it), and the report link of every rollout task."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

from airflow.plugins_manager import AirflowPlugin
from fastapi import Depends, FastAPI, Form, HTTPException, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from canary.rollout.core import pause
from canary.rollout.core.audit import AuditLog
from canary.storage import Store, StoreError, open_store
from canary.storage.store import valid_key
from kafka_canary_provider.hooks.run_storage import run_storage_options
from kafka_canary_provider.links import URL_PREFIX, RolloutReportLink
from kafka_canary_provider.runs import rollout_run_id, runs_store

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


_INDEX_STYLE = ("body{font:14px system-ui,sans-serif;margin:2em}table{border-collapse:collapse}"
                "td,th{border:1px solid #ccc;padding:3px 6px;text-align:left;vertical-align:top}"
                "td{max-width:16em;overflow-wrap:anywhere}th{background:#f3f3f3}caption{text-align:left}")


def _index(store: Store, filters: dict[str, str], page: int) -> str:
    """The runs index page: every run under the run storage, newest first, 50 a page, filtered by cluster, kind,
    verdict and status (a plain GET form: no script needed)."""
    from canary.fields import format_utc
    from canary.rollout.core.index import FILTERS, RunsIndex, query

    found = query(RunsIndex(store).entries(), filters, page)
    selects = []
    for name in FILTERS:
        options = "".join(f'<option value="{html.escape(v)}"{" selected" if filters.get(name) == v else ""}>'
                          f"{html.escape(v)}</option>" for v in found.choices[name])
        selects.append(f'<label>{name} <select name="{name}"><option value="">any</option>{options}</select></label> ')
    rows = []
    for e in found.rows:
        run_id = html.escape(e.run_id)
        cells = (e.kind, e.cluster, e.change, e.verdict or "—", e.outcome or "—", e.status,
                 format_utc(e.started_ms), "—" if e.duration_s is None else f"{e.duration_s:g} s", e.trigger or "—")
        report = html.escape(e.report or f"runs/{e.run_id}/report.html")
        rows.append(f'<tr><th scope="row"><a href="{URL_PREFIX}/{report}">{run_id}</a></th>'
                    + "".join(f"<td>{html.escape(str(cell))}</td>" for cell in cells) + "</tr>")
    wanted = {k: v for k, v in filters.items() if v}
    links = " ".join(f'<a href="?{html.escape(urlencode(wanted | {"page": n}))}" rel="{rel}">{text}</a>'
                     for n, rel, text in ((found.page - 1, "prev", "newer"), (found.page + 1, "next", "older"))
                     if 1 <= n <= found.pages)
    headers = "".join(f'<th scope="col">{h}</th>' for h in ("run", "kind", "cluster", "change", "verdict", "outcome",
                                                             "status", "started (UTC)", "duration", "started by"))
    return ("<!doctype html><html lang='en'><head><meta charset='utf-8'><title>Canary rollouts</title>"
            f"<style>{_INDEX_STYLE}</style></head><body><h1>Canary rollouts</h1>"
            f"<form method='get'>{''.join(selects)}<button type='submit'>Filter</button></form>"
            f"<p>{found.total} run(s), page {found.page} of {found.pages} {links}</p>"
            "<table><caption>Newest first</caption>"
            f"<tr>{headers}</tr>{''.join(rows)}</table></body></html>")


def create_app() -> FastAPI:
    """The report pages, read from the run storage (a directory, or the object store every worker writes to: the
    API server needs no disk shared with the workers)."""
    from airflow.api_fastapi.core_api.security import get_user

    app = FastAPI(title="kafka-canary rollout reports", dependencies=[Depends(_authenticated())])
    app.state.may_change_runs = _may_change_runs()  # one dependency object (a test overrides it by this key)
    person = Depends(get_user)

    @app.get("/", response_class=HTMLResponse)
    def index(cluster: str = "", kind: str = "", verdict: str = "", status: str = "", page: int = 1) -> str:
        return _index(runs_store(), {"cluster": cluster, "kind": kind, "verdict": verdict, "status": status}, page)

    @app.get("/runs/{run_id}/{page:path}")
    def report(run_id: str, page: str) -> Response:
        return _served(runs_store(), page_key(run_id, page))

    @app.get("/sweeps/{cluster}/{sweep_id}/{page:path}")
    def sweep_report(cluster: str, sweep_id: str, page: str) -> Response:
        from canary.sweep import history_root

        key = page_key(f"{cluster}/reports/{sweep_id}", page)
        return _served(open_store(history_root(), run_storage_options()), key)

    @app.get("/dag-runs/{dag_id}/{run_id}", response_class=HTMLResponse)
    def dag_run_report(dag_id: str, run_id: str) -> Response:
        return _dag_run_page(runs_store(), dag_id, run_id)

    @app.get("/dag-runs/{dag_id}/{run_id}/promotion", response_class=HTMLResponse)
    def promotion(dag_id: str, run_id: str) -> str:
        return _promotion_page(runs_store(), dag_id, run_id)

    # Pausing a promotion changes a run: Airflow's permission to change this DAG's runs, and a form of this site.
    @app.post("/dag-runs/{dag_id}/{run_id}/promotion", dependencies=[Depends(app.state.may_change_runs)])
    def promotion_action(dag_id: str, run_id: str, request: Request, action: str = Form(...),
                         reason: str = Form(""), user: Any = person) -> Response:
        _same_site(request)
        store = runs_store().child(rollout_run_id(run_id))
        if store.read("run.json") is None:
            raise HTTPException(status_code=404, detail="no rollout for this DAG run")
        by = f"{getattr(user, 'get_name', lambda: None)() or 'a person'} (Airflow)"
        audit = AuditLog(store, rollout_run_id(run_id))
        if action == "pause":
            pause.pause(store, audit, by, reason)
        elif action == "resume":
            pause.resume(store, audit, by)
        else:
            raise HTTPException(status_code=400, detail="action must be pause or resume")
        return RedirectResponse(f"{URL_PREFIX}/dag-runs/{quote(dag_id)}/{quote(run_id)}/promotion", status_code=303)

    return app


def _may_change_runs():
    """Airflow's dependency that refuses a user who may not change the runs of the path's DAG."""
    from airflow.api_fastapi.core_api.security import DagAccessEntity, requires_access_dag

    return requires_access_dag("PUT", DagAccessEntity.RUN)


def _same_site(request: Request) -> None:
    """Refuses a form posted from another site (its Origin or Referer names another host)."""
    sent = request.headers.get("origin") or request.headers.get("referer")
    if sent and urlsplit(sent).netloc != request.url.netloc:
        raise HTTPException(status_code=403, detail="a form of another site")


def _promotion_page(store: Store, dag_id: str, run_id: str) -> str:
    """The promotion of the DAG run's rollout: paused or not, and a button to pause it before its next wave or to
    let it go on (a plain form: no script needed)."""
    run = store.child(rollout_run_id(run_id))
    if run.read("run.json") is None:
        raise HTTPException(status_code=404, detail="no rollout for this DAG run")
    held = pause.paused(run)
    state = (f"<p><strong>{html.escape(pause.describe(held))}</strong>: the promotion stops before its next wave "
             f"(the wave under way finishes, and its look).</p>" if held is not None else
             "<p>Not paused: the promotion goes on wave after wave.</p>")
    form = ('<form method="post"><input type="hidden" name="action" value="resume">'
            '<button type="submit">Resume the promotion</button></form>' if held is not None else
            '<form method="post"><input type="hidden" name="action" value="pause">'
            '<label>Why <input name="reason" maxlength="500" size="50"></label> '
            '<button type="submit">Pause before the next wave</button></form>')
    report = f"{URL_PREFIX}/runs/{quote(rollout_run_id(run_id))}/report.html"
    return ("<!doctype html><html lang='en'><head><meta charset='utf-8'><title>Canary promotion</title></head>"
            "<body style='font:14px system-ui,sans-serif;margin:2em'><h1>Promotion of "
            f"{html.escape(dag_id)} / {html.escape(run_id)}</h1>{state}{form}"
            f"<p><a href='{html.escape(report)}'>The run's report</a></p></body></html>")


def _served(store: Store, key: str) -> Response:
    data = store.read(key)
    if data is None:
        raise HTTPException(status_code=404, detail="no such report")
    return Response(content=data, media_type=SERVED[Path(key).suffix])


def _dag_run_page(store: Store, dag_id: str, run_id: str) -> Response:
    """What the "Canary report" tab of a DAG run (or of one of its tasks) shows: the report of the rollout the run
    drives, each sweep's report when it swept several clusters, or a line saying there is none (yet)."""
    from canary.rollout.core.index import RunsIndex

    found = [e for e in RunsIndex(store).entries() if e.airflow_run == f"{dag_id}/{run_id}" and e.report]
    if not found and store.read(f"{rollout_run_id(run_id)}/report.html") is not None:  # a row without the field
        return RedirectResponse(f"{URL_PREFIX}/runs/{rollout_run_id(run_id)}/report.html", status_code=307)
    if len(found) == 1:
        return RedirectResponse(f"{URL_PREFIX}/{found[0].report}", status_code=307)
    items = "".join(f'<li><a href="{URL_PREFIX}/{html.escape(e.report)}">{html.escape(e.kind)} of '
                    f"{html.escape(e.cluster)}: {html.escape(e.verdict or e.status)}</a></li>" for e in found)
    said = (f"<ul>{items}</ul>" if found else
            "<p>No kafka-canary report for this DAG run: its first rollout or sweep task writes one.</p>")
    return HTMLResponse("<!doctype html><html lang='en'><head><meta charset='utf-8'><title>Canary report</title>"
                        "</head><body style='font:14px system-ui,sans-serif;margin:2em'><h1>Canary reports of "
                        f"{html.escape(dag_id)} / {html.escape(run_id)}</h1>{said}</body></html>")


class KafkaCanaryPlugin(AirflowPlugin):
    name = "kafka_canary"
    fastapi_apps = [{"app": create_app(), "url_prefix": URL_PREFIX, "name": "kafka-canary reports"}]
    # The DAG run's and the task's tab: Airflow's UI fills in {DAG_ID} and {RUN_ID} and shows the page inside its own.
    external_views = [{"name": "Canary rollouts", "href": f"{URL_PREFIX}/", "destination": "nav",
                       "category": "browse", "url_route": "kafka-canary"}] + [
        {"name": "Canary report", "href": f"{URL_PREFIX}/dag-runs/{{DAG_ID}}/{{RUN_ID}}", "destination": where,
         "url_route": f"kafka-canary-{where.replace('_', '-')}"} for where in ("dag_run", "task_instance")] + [
        {"name": "Canary promotion", "href": f"{URL_PREFIX}/dag-runs/{{DAG_ID}}/{{RUN_ID}}/promotion",
         "destination": "dag_run", "url_route": "kafka-canary-promotion"}]
    operator_extra_links = [RolloutReportLink()]
