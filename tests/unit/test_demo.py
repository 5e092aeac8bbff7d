"""The demo runs the DAGs and the Airflow provider of a checkout, found without looking at where canary is
installed."""

from __future__ import annotations

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
    assert env["PYTHONPATH"].split(":")[0] == str(REPO / "plugins")


def test_outside_a_checkout_the_error_says_what_to_do(tmp_path, monkeypatch):
    monkeypatch.delenv(demo.PROJECT_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(CanaryError, match=rf"{tmp_path} has no dags/kafka_broker_canary.py and no "
                                          rf"plugins/kafka_canary_provider: .* set KAFKA_CANARY_PROJECT"):
        demo.project_dir()
