"""Every DAG in dags/ imports without errors; the broker rollout DAG has the task graph and the typed trigger
form of docs/design.md, and its form refuses bad values before any task runs."""

from __future__ import annotations

from pathlib import Path

import pytest
from airflow.dag_processing.dagbag import DagBag

REPO = Path(__file__).resolve().parents[3]
BROKER_TASKS = {"preflight", "deploy_canary", "warm_up", "lead", "probe_window", "analysis_request",
                "spark_analysis", "judge", "route_verdict", "verdict_promote", "verdict_rollback", "ask_a_person",
                "promote", "rollback", "verify", "finalize", "report"} | {f"promote_wave_{n}" for n in range(2, 7)}


@pytest.fixture(scope="module")
def dagbag() -> DagBag:
    # Airflow 3.3's DagBag has no include_examples; given a folder it loads only that folder.
    return DagBag(dag_folder=str(REPO / "dags"))


def test_no_import_errors(dagbag):
    assert dagbag.import_errors == {}
    assert "kafka_broker_canary" in dagbag.dags


def test_every_dag_id_is_its_file_name_and_documented(dagbag):
    for dag_id, dag in dagbag.dags.items():
        assert dag.fileloc.endswith(f"/{dag_id}.py")
        assert dag.doc_md


def test_broker_dag_graph(dagbag):
    dag = dagbag.dags["kafka_broker_canary"]
    assert set(dag.task_dict) == BROKER_TASKS
    assert dag.max_active_runs == 1
    down = {t: set(dag.task_dict[t].downstream_task_ids) for t in dag.task_dict}
    chain = ["preflight", "deploy_canary", "warm_up", "lead", "probe_window", "analysis_request",
             "spark_analysis", "judge", "route_verdict"]
    for a, b in zip(chain, chain[1:], strict=False):
        assert down[a] == {b}, a
    assert down["route_verdict"] == {"verdict_promote", "verdict_rollback", "ask_a_person"}
    assert down["ask_a_person"] == {"promote", "rollback"}
    assert down["verdict_promote"] == {"promote"} and down["verdict_rollback"] == {"rollback"}
    # one task per wave, each ready for verify: a wave the plan lacks is skipped, and verify still runs
    waves = ["promote"] + [f"promote_wave_{n}" for n in range(2, 7)]
    for a, b in zip(waves, waves[1:], strict=False):
        assert down[a] == {b, "verify"}, a
    assert down["promote_wave_6"] == down["rollback"] == {"verify"} and down["verify"] == {"finalize"}
    assert [dag.task_dict[w].wave for w in waves] == [1, 2, 3, 4, 5, 6]
    assert dag.task_dict["promote"].approved_by == "ask_a_person"
    assert dag.task_dict["promote_wave_2"].approved_by is None
    assert down["finalize"] == {"report"}
    rules = {t: dag.task_dict[t].trigger_rule.value for t in ("judge", "promote", "rollback", "verify", "report")}
    assert rules == {"judge": "all_done", "promote": "none_failed_min_one_success",
                     "rollback": "none_failed_min_one_success", "verify": "none_failed_min_one_success",
                     "report": "all_done"}


def test_spark_task_and_person(dagbag):
    dag = dagbag.dags["kafka_broker_canary"]
    spark = dag.task_dict["spark_analysis"]
    assert spark._conn_id == "spark_default"
    assert spark.application.endswith("spark_jobs/canary_analysis.py")
    assert spark.jars == "{{ kafka_connector_jars() }}"  # resolved when the task runs, not at import
    assert "--observations" in spark.application_args and "--out" in spark.application_args
    # Files of the run become paths on the Spark task's worker; the window's bounds and the probe's run id do not.
    args = dict(zip(spark.application_args[::2], spark.application_args[1::2], strict=True))
    assert {flag for flag, value in args.items() if "run_file(" in value} == {"--observations", "--config", "--out",
                                                                            "--before"}
    assert str(REPO) in spark.env_vars["PYTHONPATH"]
    person = dag.task_dict["ask_a_person"]
    assert person.defaults == ["Roll back"] and person.response_timeout.total_seconds() > 0
    assert person.options_mapping == {"Promote": "promote", "Roll back": "rollback"}


def test_trigger_form_params_are_typed_and_titled(dagbag):
    params = dagbag.dags["kafka_broker_canary"].params
    expected = {"cluster_conn_id", "target_version", "config_overrides", "canary_count", "canary_brokers", "window",
                "interim_interval", "probe_rate", "preflight_probe", "judge_config", "engine", "finalize", "bake",
                "on_inconclusive", "client_delay_ms"}
    assert expected <= set(params)
    for name in params:
        param = params.get_param(name)
        assert param.schema.get("type") and param.schema.get("title") and param.description, name


@pytest.mark.parametrize(("name", "value"), [
    ("canary_count", 0), ("window", "two minutes"), ("engine", "pandas"), ("target_version", "latest"),
    ("config_overrides", "message.max.bytes=100"), ("probe_rate", -1), ("canary_brokers", ["one"]),
])
def test_trigger_form_refuses_bad_values(dagbag, name, value):
    from airflow.sdk.definitions.param import ParamsDict
    from airflow.sdk.exceptions import ParamValidationError

    params = ParamsDict(dict(dagbag.dags["kafka_broker_canary"].params.items()))
    with pytest.raises(ParamValidationError, match=name):
        params[name] = value  # what the trigger form and `dags trigger/test -c` do before a run exists


@pytest.mark.parametrize("bad", [False, True])
def test_demo_params_pass_the_form_and_make_a_valid_spec(dagbag, bad):
    from airflow.sdk.definitions.param import ParamsDict
    from kafka_canary_provider.runs import spec_from_params

    from canary.demo import demo_params
    from canary.rollout.broker.spec import load_spec

    params = ParamsDict(dict(dagbag.dags["kafka_broker_canary"].params.items()))
    for name, value in demo_params(bad=bad).items():
        params[name] = value
    values = params.validate()
    spec = load_spec(spec_from_params(values, {"deployer": "local", "dir": "/tmp/c", "client": {}}, "demo-run"))
    assert spec.change.config == ({"message.max.bytes": "100"} if bad else {"num.io.threads": "6"})
    assert spec.change.version is None
    assert spec.judge.engine == "spark" and values["on_inconclusive"] == "rollback"


# ----- the health sweep DAG -----

SWEEP_TASKS = {"registered_clusters", "sweep", "summary"}


def test_health_sweep_dag_graph_schedule_and_asset(dagbag):
    from airflow.sdk import AssetAlias
    from kafka_canary_provider.operators.sweep import HEALTH_ALIAS, alert_if_degraded, alert_on_failure

    dag = dagbag.dags["kafka_health_sweep"]
    assert set(dag.task_dict) == SWEEP_TASKS
    assert (dag.max_active_runs, dag.catchup) == (1, False)
    assert (dag.schedule, dag.timetable.expression) == ("@hourly", "0 * * * *")
    assert dag.render_template_as_native_obj  # the params reach the operator as numbers and mappings
    down = {t: set(dag.task_dict[t].downstream_task_ids) for t in dag.task_dict}
    assert down == {"registered_clusters": {"sweep"}, "sweep": {"summary"}, "summary": set()}
    sweep = dag.task_dict["sweep"]
    # One mapped task instance per registered cluster, mapped over the connection ids.
    assert set(sweep.expand_input.value) == {"kafka_canary_conn_id"}
    assert sweep.partial_kwargs["outlets"] == [AssetAlias(HEALTH_ALIAS)]
    assert sweep.partial_kwargs["on_success_callback"] == [alert_if_degraded]
    assert dag.task_dict["registered_clusters"].on_failure_callback == [alert_on_failure]
    assert dag.task_dict["summary"].trigger_rule.value == "all_done"


def test_every_dag_param_is_typed_and_titled(dagbag):
    for dag_id, dag in dagbag.dags.items():
        for name in dag.params:
            param = dag.params.get_param(name)
            assert param.schema.get("type") and param.schema.get("title") and param.description, (dag_id, name)


@pytest.mark.parametrize(("name", "value"), [
    ("clusters", "kafka_canary_default"), ("clusters", [""]), ("clusters", ["a", "a"]), ("duration", "half a minute"),
    ("probe_rate", 0), ("reference_sweeps", 0), ("judge_config", "alpha=0.1"),
])
def test_health_sweep_form_refuses_bad_values(dagbag, name, value):
    from airflow.sdk.definitions.param import ParamsDict
    from airflow.sdk.exceptions import ParamValidationError

    params = ParamsDict(dict(dagbag.dags["kafka_health_sweep"].params.items()))
    with pytest.raises(ParamValidationError, match=name):
        params[name] = value


# ----- the client rollout DAG -----

CLIENT_TASKS = {"preflight", "open_lane", "deploy_canary", "window", "judge", "route_verdict", "verdict_promote",
                "verdict_rollback", "ask_a_person", "promote", "rollback", "verify", "report"}


def test_client_dag_graph(dagbag):
    from kafka_canary_provider.operators.client_rollout import ClientStep

    dag = dagbag.dags["kafka_client_canary"]
    assert set(dag.task_dict) == CLIENT_TASKS and dag.max_active_runs == 1
    down = {t: set(dag.task_dict[t].downstream_task_ids) for t in dag.task_dict}
    chain = ["preflight", "open_lane", "deploy_canary", "window", "judge", "route_verdict"]
    for a, b in zip(chain, chain[1:], strict=False):
        assert down[a] == {b}, a
    assert down["route_verdict"] == {"verdict_promote", "verdict_rollback", "ask_a_person"}
    assert down["ask_a_person"] == {"promote", "rollback"}
    assert down["promote"] == down["rollback"] == {"verify"} and down["verify"] == {"report"}
    steps = [t for t in dag.task_dict.values() if isinstance(t, ClientStep)]
    assert {t.task_id for t in steps} == {"preflight", "open_lane", "deploy_canary", "window", "judge", "promote",
                                          "rollback", "verify", "report"}
    assert {t.kind().name for t in steps} == {"client"}
    assert dag.task_dict["judge"].trigger_rule.value == "all_done"


def test_client_dag_params_make_a_valid_client_spec(dagbag):
    from airflow.sdk.definitions.param import ParamsDict
    from kafka_canary_provider.runs import client_spec_from_params

    from canary.forms import FormError
    from canary.rollout.client.spec import ServiceSpec, load_client_spec

    params = ParamsDict(dict(dagbag.dags["kafka_client_canary"].params.items()))
    params["fleet_dir"] = "/tmp/orders-fleet"
    params["window"] = "30s"
    values = params.validate()
    spec = load_client_spec(client_spec_from_params(values, {"deployer": "local", "dir": "/tmp/c"}, "client-run"))
    assert (spec.change.from_, spec.change.to, spec.window.duration, spec.judge.engine) == ("v1", "v2", 30.0, "spark")
    assert (spec.service.topic, spec.service.dir) == ("orders", "/tmp/orders-fleet")
    assert spec.service.consumers == ServiceSpec.model_fields["consumers"].default  # the form shows the model's
    assert spec.run_id == "client-run"
    with pytest.raises(FormError, match="windw: unknown param; known params are"):
        client_spec_from_params({**values, "windw": "1m"}, {"deployer": "local", "dir": "/tmp/c"}, "client-run")


@pytest.mark.parametrize(("name", "value"), [
    ("fleet_dir", ""), ("canary_partitions", 0), ("window", "soon"), ("to_version", "v 2"), ("engine", "pandas"),
])
def test_client_trigger_form_refuses_bad_values(dagbag, name, value):
    from airflow.sdk.definitions.param import ParamsDict
    from airflow.sdk.exceptions import ParamValidationError

    params = ParamsDict(dict(dagbag.dags["kafka_client_canary"].params.items()))
    with pytest.raises(ParamValidationError, match=name):
        params[name] = value
