"""The plugin serves only report files of runs in the run storage and of sweeps in the history, only to authenticated
users; a DAG run's tab opens its report; what started a DAG run; the report link and the run id mapping."""

from __future__ import annotations

import json

import pytest
from fastapi import HTTPException
from fastapi.testclient import TestClient
from kafka_canary_provider import plugin
from kafka_canary_provider.links import RolloutReportLink
from kafka_canary_provider.runs import airflow_origin, rollout_run_id, spec_from_params

from canary.release import RELEASE_NOTE
from canary.rollout.broker.spec import load_spec
from canary.rollout.core import pause
from canary.rollout.core.audit import AuditLog
from canary.rollout.core.index import IndexEntry, RunsIndex
from canary.rollout.core.record import Origin
from canary.rollout.core.run import RunState
from canary.storage import open_store


@pytest.fixture
def runs(tmp_path, monkeypatch):
    monkeypatch.setenv("KAFKA_CANARY_RUNS", str(tmp_path / "runs"))
    run = tmp_path / "runs" / "r1"
    (run / "analysis-1").mkdir(parents=True)
    (run / "report.html").write_text("<p>ROLLBACK</p>")
    (run / "analysis-1" / "latency.png").write_bytes(b"\x89PNG")
    (run / "run.json").write_text(json.dumps({"schema": 1, "run_id": "r1", "created_ms": 1, "spec": {},
                                              "status": "verified rolled_back", "steps": {},
                                              "verdict": {"verdict": "ROLLBACK", "reason": "e2e p99"}}))
    (run / "observations-window-1.jsonl").write_text("{}")
    (tmp_path / "secret.html").write_text("not a report")
    return tmp_path / "runs"


def test_page_key_names_report_files(runs):
    assert plugin.page_key("r1", "report.html") == "r1/report.html"
    assert plugin.page_key("r1", "analysis-1/latency.png") == "r1/analysis-1/latency.png"


@pytest.mark.parametrize(("run_id", "page"), [
    ("r1", "run.json"), ("r1", "observations-window-1.jsonl"), ("r1", "../../secret.html"),
    ("..", "secret.html"), ("r1", "/etc/x.html"), ("r1", ".x.html"), ("r1", "a//b.html"),
])
def test_page_key_refuses_everything_else(runs, run_id, page):
    with pytest.raises(HTTPException) as raised:
        plugin.page_key(run_id, page)
    assert raised.value.status_code == 404


def test_reports_need_an_airflow_login(runs):
    client = TestClient(plugin.create_app())
    for url in ("/", "/runs/r1/report.html"):
        response = client.get(url)
        assert response.status_code in (401, 403), (url, response.status_code)
        assert "ROLLBACK" not in response.text


def test_reports_served_to_an_authenticated_user(runs):
    from airflow.api_fastapi.core_api.security import get_user

    app = plugin.create_app()
    app.dependency_overrides[get_user] = lambda: object()  # what Airflow's login resolves to
    client = TestClient(app)
    assert client.get("/runs/r1/report.html").text == "<p>ROLLBACK</p>"
    index = client.get("/").text
    assert "<td>ROLLBACK</td><td>ROLLBACK</td><td>verified rolled_back</td>" in index and ">r1</a>" in index
    assert client.get("/runs/r1/analysis-1/latency.png").content == b"\x89PNG"
    for missing in ("/runs/r1/run.json", "/runs/r1/missing.html", "/runs/r2/report.html",
                    "/runs/r1/observations-window-1.jsonl"):
        assert client.get(missing).status_code == 404, missing


def _logged_in():
    from airflow.api_fastapi.core_api.security import get_user

    app = plugin.create_app()
    app.dependency_overrides[get_user] = lambda: object()
    return TestClient(app, follow_redirects=False)


def test_sweeps_are_listed_and_their_reports_served_from_the_history(runs, tmp_path, monkeypatch):
    monkeypatch.setenv("KAFKA_CANARY_HISTORY", str(tmp_path / "history"))
    report = tmp_path / "history" / "prod_eu" / "reports" / "s1"
    report.mkdir(parents=True)
    (report / "report.html").write_text("<p>HEALTHY</p>")
    RunsIndex(open_store(runs)).put(IndexEntry.of_sweep("prod_eu", "s1", "HEALTHY", 10, 31_010, Origin(
        trigger="schedule", dag_id="kafka_health_sweep", airflow_run_id="scheduled__1")))
    client = _logged_in()
    index = client.get("/").text
    assert '<a href="/kafka-canary/sweeps/prod_eu/s1/report.html">sweep-prod_eu-s1</a>' in index
    assert "<td>Airflow&#x27;s schedule</td>" in index
    assert client.get("/sweeps/prod_eu/s1/report.html").text == "<p>HEALTHY</p>"
    for missing in ("/sweeps/prod_eu/s2/report.html", "/sweeps/prod_eu/s1/../../../runs/r1/run.json",
                    "/sweeps/prod_eu/s1/observations.jsonl"):
        assert client.get(missing).status_code == 404, missing


def test_a_dag_run_s_tab_opens_its_report(runs):
    store = open_store(runs)
    state = RunState.open(store.child("rel_1"), "rel_1", {"cluster": {"dir": "/c"}, "change": {"version": "4.1.2"}})
    state.started_by(Origin(trigger="release", dag_id="kafka_broker_canary", airflow_run_id="rel:1"))
    for n in (1, 2):  # one sweep DAG run, two clusters
        RunsIndex(store).put(IndexEntry.of_sweep(f"c{n}", "s9", "DEGRADED", 10, 20, Origin(
            trigger="schedule", dag_id="kafka_health_sweep", airflow_run_id="scheduled__9")))
    client = _logged_in()
    opened = client.get("/dag-runs/kafka_broker_canary/rel:1")
    assert opened.status_code == 307 and opened.headers["location"] == "/kafka-canary/runs/rel_1/report.html"
    swept = client.get("/dag-runs/kafka_health_sweep/scheduled__9").text
    assert all(f'href="/kafka-canary/sweeps/c{n}/s9/report.html">sweep of c{n}: DEGRADED' in swept for n in (1, 2))
    older = client.get("/dag-runs/kafka_broker_canary/r1")  # a run from before runs said what started them
    assert older.status_code == 307 and older.headers["location"] == "/kafka-canary/runs/r1/report.html"
    none = client.get("/dag-runs/other_dag/manual__1")
    assert none.status_code == 200 and "No kafka-canary report for this DAG run" in none.text


class _User:
    def get_name(self) -> str:
        return "alice"


def test_a_person_pauses_and_resumes_a_promotion_from_the_dag_run_s_tab(runs):
    from airflow.api_fastapi.core_api.security import get_user

    app = plugin.create_app()
    app.dependency_overrides[get_user] = _User
    app.dependency_overrides[app.state.may_change_runs] = lambda: None  # Airflow's "may change this DAG's runs"
    client = TestClient(app, follow_redirects=False)
    store = open_store(runs).child("r1")
    page = client.get("/dag-runs/kafka_broker_canary/r1/promotion").text
    assert "Not paused" in page and 'value="pause"' in page
    done = client.post("/dag-runs/kafka_broker_canary/r1/promotion", data={"action": "pause", "reason": "SLO red"})
    assert done.status_code == 303
    assert done.headers["location"] == "/kafka-canary/dag-runs/kafka_broker_canary/r1/promotion"
    held = pause.paused(store)
    assert held["by"] == "alice (Airflow)" and held["reason"] == "SLO red"
    page = client.get("/dag-runs/kafka_broker_canary/r1/promotion").text
    assert "paused by alice (Airflow)" in page and "SLO red" in page and 'value="resume"' in page
    foreign = client.post("/dag-runs/kafka_broker_canary/r1/promotion", data={"action": "resume"},
                          headers={"origin": "https://elsewhere.example"})
    assert foreign.status_code == 403 and pause.paused(store) is not None  # a form of another site changes nothing
    assert client.post("/dag-runs/kafka_broker_canary/r1/promotion", data={"action": "resume"}).status_code == 303
    assert pause.paused(store) is None
    said = [(e["action"], e["by"]) for e in AuditLog(store, "r1").entries()]
    assert said == [("paused", "alice (Airflow)"), ("resumed", "alice (Airflow)")]  # the report's Promotion section
    assert client.post("/dag-runs/kafka_broker_canary/r1/promotion", data={"action": "stop"}).status_code == 400
    assert client.get("/dag-runs/kafka_broker_canary/none/promotion").status_code == 404


def test_pausing_asks_airflow_whether_the_person_may_change_the_dag_s_runs(runs):
    from airflow.api_fastapi.core_api.security import get_user

    asked = []

    def refuse(dag_id: str):
        asked.append(dag_id)
        raise HTTPException(status_code=403, detail="Forbidden")

    app = plugin.create_app()
    app.dependency_overrides[get_user] = _User
    app.dependency_overrides[app.state.may_change_runs] = refuse
    client = TestClient(app, follow_redirects=False)
    refused = client.post("/dag-runs/kafka_broker_canary/r1/promotion", data={"action": "pause"})
    assert refused.status_code == 403 and asked == ["kafka_broker_canary"]
    assert pause.paused(open_store(runs).child("r1")) is None


class _DagRun:
    dag_id, run_id, triggering_user_name = "kafka_broker_canary", "manual__1", "admin"

    def __init__(self, run_type: str, note: str | None = None):
        self.run_type, self.note = run_type, note


@pytest.mark.parametrize(("run_type", "note", "params", "trigger"), [
    ("manual", None, {}, "airflow"), ("manual", None, {"started_by": "release"}, "release"),
    ("manual", RELEASE_NOTE, {}, "release"), ("scheduled", None, {}, "schedule"),
    ("asset_triggered", None, {}, "asset"), ("backfill", None, {}, "backfill"),
    ("manual", "a person's note", {"started_by": ""}, "airflow"),
])
def test_what_started_a_dag_run(run_type, note, params, trigger):
    origin = airflow_origin(_DagRun(run_type, note), params)
    assert (origin.trigger, origin.by, origin.dag_id, origin.airflow_run_id) == (
        trigger, "admin", "kafka_broker_canary", "manual__1")
    assert airflow_origin(None) is None


def test_plugin_registers_app_view_and_link():
    p = plugin.KafkaCanaryPlugin
    assert p.fastapi_apps[0]["url_prefix"] == "/kafka-canary"
    assert p.external_views[0]["href"] == "/kafka-canary/"
    tabs = {(v["name"], v["destination"]): v["href"] for v in p.external_views[1:]}
    assert tabs == {("Canary report", "dag_run"): "/kafka-canary/dag-runs/{DAG_ID}/{RUN_ID}",
                    ("Canary report", "task_instance"): "/kafka-canary/dag-runs/{DAG_ID}/{RUN_ID}",
                    ("Canary promotion", "dag_run"): "/kafka-canary/dag-runs/{DAG_ID}/{RUN_ID}/promotion"}
    assert isinstance(p.operator_extra_links[0], RolloutReportLink)


@pytest.mark.parametrize(("airflow_run_id", "expected"), [
    ("manual__2026-11-21T07:57:12.927547+00:00", "manual__2026-11-21T07_57_12.927547_00_00"),
    ("__odd", "r__odd"),
    ("x" * 150, "x" * 100),
])
def test_rollout_run_id_fits_the_spec(airflow_run_id, expected):
    assert rollout_run_id(airflow_run_id) == expected
    load_spec({"cluster": {"dir": "/c"}, "change": {"version": "4.1.2"}, "canary": {"count": 1},
               "run_id": expected})


def test_report_link_points_at_the_plugin():
    class Key:
        run_id = "manual__2026-11-21T07:57:12+00:00"

    assert RolloutReportLink().get_link(None, ti_key=Key()) == (
        "/kafka-canary/runs/manual__2026-11-21T07_57_12_00_00/report.html")


def test_spec_from_params():
    params = {"target_version": "4.1.2", "config_overrides": {"message.max.bytes": "100"}, "canary_count": 2,
              "canary_brokers": [], "window": "60s", "interim_interval": "20s", "probe_rate": 50,
              "preflight_probe": "3s", "judge_config": {"warmup_s": 15}, "engine": "inline", "finalize": False,
              "client_delay_ms": 300}
    spec = load_spec(spec_from_params(params, {"deployer": "local", "dir": "/c", "client": {}}, "run-1"))
    assert (spec.change.version, spec.change.config, spec.canary.count, spec.probe.window,
            spec.probe.interim_interval) == (
        "4.1.2", {"message.max.bytes": "100"}, 2, 60.0, 20.0)
    assert (spec.judge.engine, spec.finalize, spec.fault.client_delay_ms, spec.run_id) == (
        "inline", False, 300.0, "run-1")
    brokers = load_spec(spec_from_params({**params, "canary_brokers": [3]}, {"dir": "/c"}, "run-1"))
    assert brokers.canary.brokers == [3] and brokers.canary.count is None
    config_only = load_spec(spec_from_params({**params, "target_version": None}, {"dir": "/c"}, "run-1"))
    assert config_only.change.version is None
