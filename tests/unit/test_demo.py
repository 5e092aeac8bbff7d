"""The demo runs the DAGs of a checkout, found without looking at where canary is installed, with the provider
installed in this environment."""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import pytest

from canary import demo
from canary.errors import CanaryError

REPO = Path(__file__).resolve().parents[2]


def test_the_project_is_the_folder_given_else_the_environments_else_the_working_directory(tmp_path, monkeypatch):
    monkeypatch.delenv(demo.PROJECT_ENV, raising=False)
    assert demo.project_dir(REPO) == REPO
    monkeypatch.chdir(REPO)
    assert demo.project_dir() == REPO
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(demo.PROJECT_ENV, str(REPO))
    env = demo.airflow_env(tmp_path / "home", tmp_path / "runs", tmp_path / "cluster")
    assert env["AIRFLOW__CORE__DAGS_FOLDER"] == str(REPO / "dags")
    # The provider is the installed package's; the checkout's plugins/ is neither a plugins folder nor on the path.
    assert env["AIRFLOW__CORE__PLUGINS_FOLDER"] == str(tmp_path / "home" / "plugins")
    assert env.get("PYTHONPATH") == os.environ.get("PYTHONPATH")
    # The analysis task's local Spark driver binds loopback (the connection is local[2]).
    assert json.loads(env["AIRFLOW_CONN_SPARK_DEFAULT"])["host"].startswith("local")
    assert env["SPARK_LOCAL_IP"] == os.environ.get("SPARK_LOCAL_IP", "127.0.0.1")


def test_outside_a_checkout_the_error_says_what_to_do(tmp_path, monkeypatch):
    monkeypatch.delenv(demo.PROJECT_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(CanaryError, match=rf"{tmp_path} has no dags/kafka_broker_canary.py: .* set "
                                          rf"KAFKA_CANARY_PROJECT"):
        demo.project_dir()


def test_without_the_provider_installed_the_error_says_how_to_install_it(tmp_path, monkeypatch):
    found = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "kafka_canary_provider" else found(name, *a))
    with pytest.raises(CanaryError, match=r"provider is not installed in .*: pip install 'kafka-canary\[airflow\]'"):
        demo.airflow_env(tmp_path / "home", tmp_path / "runs", tmp_path / "cluster", REPO)


def test_the_user_traffic_gives_every_broker_two_partitions_of_the_probe_topics_replication():
    assert [(s.partitions, s.replication_factor) for s in map(demo.user_traffic_spec, (4, 2))] == [(8, 3), (4, 2)]
    spec = demo.user_traffic_spec(4)
    assert (spec.topic, spec.records_per_s, spec.record_size) == ("orders", 1000, 1000)
