"""A user's Airflow gets the provider from `pip install kafka-canary[airflow]` alone.

In a fresh venv the wheel is installed non-editable with its dependencies (pinned by requirements.lock, from PyPI or
pip's cache); with nothing of the repository on the path, no plugins folder and a fresh AIRFLOW_HOME, Airflow lists
the provider, knows the `kafka_canary` connection type with its hook and form, loads the plugin with its report
pages, imports the operators from the install and parses the DAGs against them, and a connection to a real cluster
added with `airflow connections add` passes the connection test through the hook."""

from __future__ import annotations

import json
import subprocess
import tomllib
from pathlib import Path

import pytest
from installing import REPO, clean_env, run, wheel_venv

pytestmark = [pytest.mark.integration, pytest.mark.parallel]
VERSION = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]


@pytest.fixture(scope="module")
def venv(tmp_path_factory) -> Path:
    """A fresh venv with the wheel and its `airflow` extra installed, at the locked versions."""
    return wheel_venv(tmp_path_factory.mktemp("provider-install"), "-c", REPO / "requirements.lock",
                      extra="[airflow]", timeout=900)


@pytest.fixture
def airflow(venv, tmp_path):
    """Runs a program of the venv outside the repository, with its own AIRFLOW_HOME and no other Airflow settings;
    connection tests enabled, as the stack the product starts has them."""
    env = {k: v for k, v in clean_env().items() if not k.startswith("AIRFLOW")}
    env |= {"AIRFLOW_HOME": str(tmp_path / "airflow"), "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__TEST_CONNECTION": "Enabled"}

    def run_it(program: str, *args, check: bool = True, timeout: float = 180) -> subprocess.CompletedProcess:
        cmd = [venv / "bin" / program, *args]
        if check:
            return run(cmd, cwd=tmp_path, env=env, timeout=timeout)
        return subprocess.run([str(c) for c in cmd], cwd=tmp_path, env=env, timeout=timeout, capture_output=True,
                              text=True)
    return run_it


def _json(done: subprocess.CompletedProcess):
    """The JSON document on the last line of a command's output (Airflow may log lines before it)."""
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_airflow_lists_the_provider_and_its_connection_type_with_its_form(airflow):
    providers = {p["package_name"]: p for p in _json(airflow("airflow", "providers", "list", "-o", "json"))}
    assert providers["kafka-canary"]["version"] == VERSION
    hooks = {h["connection_type"]: h for h in _json(airflow("airflow", "providers", "hooks", "-o", "json"))}
    assert hooks["kafka_canary"]["class"] == "kafka_canary_provider.hooks.kafka_canary.KafkaCanaryHook"
    assert hooks["kafka_canary"]["package_name"] == "kafka-canary"
    # What the UI's connection form is built from (GET /ui/connections/hook_meta).
    form = _json(airflow("python", "-c", """if True:
        from airflow.api_fastapi.core_api.services.ui.connections import HookMetaService
        (meta,) = [m for m in HookMetaService.hook_meta_data() if m.connection_type == "kafka_canary"]
        print(meta.model_dump_json())
    """))
    assert form["hook_name"] == "Kafka canary cluster"
    assert set(form["extra_fields"]) == {"deployer", "dir", "bootstrap_servers", "docker", "command", "client"}
    assert form["extra_fields"]["deployer"]["value"] == "local"
    assert form["extra_fields"]["deployer"]["schema"]["enum"] == ["local", "docker", "command"]
    assert all(form["extra_fields"][name]["schema"]["type"] == ["object", "null"]
               for name in ("client", "docker", "command"))
    assert form["standard_fields"]["password"]["title"].startswith("SASL password")
    assert all(form["standard_fields"][name]["hidden"] for name in ("host", "port", "login", "url_schema"))


def test_airflow_loads_the_plugin_and_its_report_pages_from_the_entry_point(airflow):
    plugins = {p["name"]: p for p in _json(airflow("airflow", "plugins", "-o", "json"))}
    plugin = plugins["kafka_canary"]
    assert f"kafka-canary=={VERSION}" in plugin["source"] and "airflow.plugins" in plugin["source"]
    assert [app["url_prefix"] for app in plugin["fastapi_apps"]] == ["/kafka-canary"]
    assert [(v["name"], v["href"], v["destination"]) for v in plugin["external_views"]] == [
        ("Canary rollouts", "/kafka-canary/", "nav"),
        ("Canary report", "/kafka-canary/dag-runs/{DAG_ID}/{RUN_ID}", "dag_run"),
        ("Canary report", "/kafka-canary/dag-runs/{DAG_ID}/{RUN_ID}", "task_instance"),
        ("Canary promotion", "/kafka-canary/dag-runs/{DAG_ID}/{RUN_ID}/promotion", "dag_run")]
    assert plugin["operator_extra_links"] == ["<kafka_canary_provider.links.RolloutReportLink object>"]


def test_the_operators_come_from_the_install_and_the_dags_parse_against_them(airflow, venv):
    shown = _json(airflow("python", "-c", f"""if True:
        import importlib, json
        from airflow.dag_processing.dagbag import DagBag
        from kafka_canary_provider.get_provider_info import get_provider_info
        info = get_provider_info()
        modules = [m for kind in ("operators", "hooks", "triggers") for i in info[kind] for m in i["python-modules"]]
        files = {{m: importlib.import_module(m).__file__ for m in modules}}
        bag = DagBag(dag_folder={str(REPO / "dags")!r})
        print(json.dumps({{"files": files, "errors": bag.import_errors, "dags": sorted(bag.dags)}}))
    """))
    assert "kafka_canary_provider.operators.rollout" in shown["files"]
    for module, path in shown["files"].items():
        assert Path(path).is_relative_to(venv), (module, path)
    assert shown["errors"] == {}
    assert shown["dags"] == ["kafka_broker_canary", "kafka_client_canary", "kafka_health_sweep"]


def test_a_connection_added_by_hand_passes_the_connection_test_naming_the_brokers(airflow, shared_cluster,
                                                                                  tmp_path):
    airflow("airflow", "db", "migrate", timeout=300)
    extra = {"deployer": "local", "dir": str(shared_cluster.directory)}
    airflow("airflow", "connections", "add", "kafka_canary_default", "--conn-json",
            json.dumps({"conn_type": "kafka_canary", "extra": extra}))
    assert "Connection success!" in airflow("airflow", "connections", "test", "kafka_canary_default").stdout

    # The form's Test button: the API server's endpoint, called as the UI calls it with the form's contents (the
    # simple auth manager lets every request in as an admin here).
    forms = {"stored": extra, "nowhere": {"deployer": "local", "dir": str(tmp_path / "none")}}
    answers = _json(airflow("python", "-c", f"""if True:
        import json, os
        os.environ["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS"] = "True"
        from airflow.api_fastapi.app import create_app
        from fastapi.testclient import TestClient
        client = TestClient(create_app())
        answers = {{}}
        for name, extra in {forms!r}.items():
            response = client.post("/api/v2/connections/test", json={{
                "connection_id": "kafka_canary_default", "conn_type": "kafka_canary", "extra": json.dumps(extra)}})
            answers[name] = [response.status_code, response.json()]
        print(json.dumps(answers))
    """))
    assert answers["stored"] == [200, {"status": True, "message": f"connected to {shared_cluster.bootstrap_servers}: "
                                                                  f"3 brokers, healthy"}]
    status, body = answers["nowhere"]
    assert status == 200 and body["status"] is False
    assert body["message"].startswith(f"no cluster in {tmp_path / 'none'}")
