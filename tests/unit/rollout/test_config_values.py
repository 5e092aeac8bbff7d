"""A broker config value ending in a backslash (Java's Properties joins the next line to it, so the next override
is lost in silence) is refused on every path a value takes, naming the key and the backslash, before anything
else: `cluster restart-broker --config`, a rollout spec's `change.config`, the trigger form's `config_overrides`
(through `release --config` too), and the deployers that write a broker's config (the last guard)."""

from __future__ import annotations

from pathlib import Path

import pytest

from canary.cli import main
from canary.errors import ClusterError
from canary.rollout.broker.spec import load_spec
from canary.rollout.core.spec import SpecError

WHY = ("a value must not end in a backslash (a trailing backslash joins the next line of server.properties to it, so "
       "the next override would be lost)")
OVERRIDES = {"a.custom.note": "x\\", "log.retention.ms": "3600000"}


def test_the_spec_refuses_it_naming_the_key():
    with pytest.raises(SpecError) as refused:
        load_spec({"cluster": {"dir": "/c"}, "change": {"config": OVERRIDES}, "canary": {"count": 1}})
    assert refused.value.problems == [f"change.config.a.custom.note: {WHY}"]


def test_the_trigger_form_refuses_it_naming_the_param_and_key():
    from canary.forms import BROKER_FORM, FormError

    with pytest.raises(FormError) as refused:
        BROKER_FORM.check({"config_overrides": OVERRIDES})
    assert f"config_overrides.a.custom.note: {WHY}" in str(refused.value)


def test_restart_broker_refuses_it_in_one_line_before_the_cluster_is_opened(tmp_path, capsys):
    code = main(["cluster", "restart-broker", "2", "--config", "a.custom.note=x\\", "--config",
                 "log.retention.ms=3600000", "--dir", str(tmp_path / "no-cluster")])
    err = capsys.readouterr().err
    assert code == 2 and err == f"error: --config: 'a.custom.note': {WHY}\n"


def test_release_refuses_it_before_airflow_is_asked(monkeypatch, capsys):
    monkeypatch.setenv("AIRFLOW_API_TOKEN", "t")
    code = main(["release", "--cluster", "prod", "--version", "4.1.2", "--config", "a.custom.note=x\\",
                 "--airflow-url", "http://127.0.0.1:9"])
    err = capsys.readouterr().err
    assert code == 2 and "\n" not in err.rstrip("\n") and f"config_overrides.a.custom.note: {WHY}" in err


def test_the_command_deployer_never_runs_its_roll_with_it(tmp_path: Path):
    from canary.rollout.deployers.base import CommandSettings
    from canary.rollout.deployers.command import CommandDeployer

    ran = tmp_path / "ran"
    deployer = CommandDeployer(CommandSettings({1: "h1"}, f"touch {ran} {{config_file}} {{version}}",
                                               "echo 3.9.2 running"), "127.0.0.1:1")
    with pytest.raises(ValueError, match=f"config 'a.custom.note': {WHY.split(' (')[0]}"):
        deployer.roll_broker(1, version="4.1.2", config=OVERRIDES, rack=None, client_delay_ms=0)
    assert not ran.exists()


def test_the_docker_deployer_refuses_it_before_a_container_is_touched():
    from canary.rollout.deployers.docker import DockerDeployer

    deployer = DockerDeployer.__new__(DockerDeployer)  # no engine: the guard comes before any call to one
    with pytest.raises(ClusterError) as refused:
        deployer.roll_broker(1, version="4.1.2", config=OVERRIDES, rack="a:canary-broker", client_delay_ms=0)
    assert str(refused.value) == (f"broker 1: config refused before its container was touched: 'a.custom.note': "
                                  f"{WHY}")
