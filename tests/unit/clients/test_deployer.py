"""The service deployer finds the services it runs by module name alone: the sample services shipped in the package
from any working directory, and a module of one's own from `cwd`."""

from __future__ import annotations

import time

import pytest

from canary import process
from canary.clients.deployer import DeployError, Instance, ServiceDeployer

NOWHERE = "127.0.0.1:9"  # nothing listens: the instance keeps trying, which is all these tests need


def _deployer(tmp_path, **kwargs) -> ServiceDeployer:
    return ServiceDeployer(tmp_path / "fleet", NOWHERE, topic="orders", group="billing", tie_to_parent=True,
                           stop_timeout=0.5, **kwargs)


def test_the_sample_services_run_from_the_installed_package(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    fleet = _deployer(tmp_path)
    try:
        assert fleet.start(Instance("orders-producer-0", "producer", "baseline", "v1"))
        status = fleet.status("orders-producer-0")
        assert status is not None and status.running, (tmp_path / "fleet" / "orders-producer-0.log").read_text()
    finally:
        fleet.stop_all()
    assert "No module named" not in (tmp_path / "fleet" / "orders-producer-0.log").read_text()


def test_a_module_of_ones_own_is_imported_from_cwd(tmp_path):
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "__init__.py").write_text("")
    (tmp_path / "app" / "producer.py").write_text("import os, time\nprint('cwd', os.getcwd(), flush=True)\n"
                                                   "time.sleep(60)\n")
    fleet = _deployer(tmp_path, module="app.{role}", cwd=tmp_path)
    try:
        assert fleet.start(Instance("p-0", "producer", "baseline", "v1"))
        assert fleet.status("p-0").running
    finally:
        fleet.stop_all()
    assert f"cwd {tmp_path}" in (tmp_path / "fleet" / "p-0.log").read_text()


def test_a_module_that_is_not_there_is_a_deploy_error(tmp_path):
    fleet = _deployer(tmp_path, module="no_such_app.{role}")
    with pytest.raises(DeployError, match="exited at once"):
        fleet.start(Instance("p-0", "producer", "baseline", "v1"))


SERVICE_SCRIPT = """#!/bin/sh
# A service of a team's own, not Python: what it was given, then a child of its own, until it is stopped.
echo "args $*" > "$KAFKA_CANARY_RECORDS"
env | grep '^KAFKA_CANARY_\\|^JAVA_OPTS' | sort >> "$KAFKA_CANARY_RECORDS"
sleep 60 &
echo "child $!" >> "$KAFKA_CANARY_RECORDS"
wait
"""


def test_a_service_of_ones_own_in_any_language_gets_the_contract_and_stops_with_its_children(tmp_path):
    (tmp_path / "svc").mkdir()
    script = tmp_path / "svc" / "billing-v2.sh"
    script.write_text(SERVICE_SCRIPT)
    script.chmod(0o755)
    fleet = _deployer(tmp_path, commands={"consumer": ["./billing-{version}.sh", "--lane={lane}", "{id}"]},
                      env={"JAVA_OPTS": "-Xmx64m"}, cwd=tmp_path / "svc")
    wanted = Instance("orders-consumer-0-canary", "consumer", "canary", "v2", 1, 2)
    try:
        assert fleet.start(wanted)
        records = fleet.records_file(wanted.name)
        deadline = time.monotonic() + 10
        while "child" not in (records.read_text() if records.exists() else "") and time.monotonic() < deadline:
            time.sleep(0.05)
        given = records.read_text().splitlines()
        assert fleet.status(wanted.name).running  # found again by the marker in its environment
        assert not fleet.start(wanted)  # converged: left alone
        assert fleet.stop(wanted.name)
        child = int(given[-1].split()[1])
        assert process.wait_gone(child, process.start_time(child) or 0, 5) or process.start_time(child) is None, \
            "the service's own child outlived it"  # stopped with it: its process group
    finally:
        fleet.stop_all()
    assert given[0] == "args --lane=canary orders-consumer-0-canary"
    env = dict(line.split("=", 1) for line in given[1:-1])
    assert env["KAFKA_CANARY_INSTANCE_ID"] == wanted.name and env["KAFKA_CANARY_LANE"] == "canary"
    assert (env["KAFKA_CANARY_VERSION"], env["KAFKA_CANARY_INSTANCE"], env["KAFKA_CANARY_INSTANCES"]) == (
        "v2", "1", "2")
    assert (env["KAFKA_CANARY_BOOTSTRAP"], env["KAFKA_CANARY_TOPIC"], env["KAFKA_CANARY_GROUP"]) == (
        NOWHERE, "orders", "billing")
    assert env["KAFKA_CANARY_CONNECTION_FILE"].endswith("client.json") and env["JAVA_OPTS"] == "-Xmx64m"
    assert not fleet.status(wanted.name).running


def test_a_service_command_whose_program_is_not_there_is_refused_before_it_starts(tmp_path):
    fleet = _deployer(tmp_path, commands={"producer": ["./feed-{version}", "--rate", "{rate}"]}, cwd=tmp_path)
    with pytest.raises(DeployError, match=r"the producer command of v9 runs './feed-v9', which is not an executable"):
        fleet.start(Instance("p-0", "producer", "baseline", "v9"))
    assert fleet.instances() == []


def test_the_contract_takes_no_variable_the_library_reads_for_something_else():
    """An instance's client settings come from KAFKA_CANARY_CLIENT_<KEY> and its lanes' marker from
    KAFKA_CANARY_MARKER: a contract variable named so would change what the instance connects with or which lane
    it is in."""
    from canary.clients.deployer import CONTRACT
    from canary.kafka.settings import ENV_PREFIX, client_settings_from_env
    names = [*CONTRACT.values(), process.MARKER_ENV]
    assert not [n for n in names if n.startswith(ENV_PREFIX) or n == "KAFKA_CANARY_MARKER"], names
    assert client_settings_from_env({n: "x" for n in names}) == {}


def test_a_service_directory_that_is_not_there_is_refused_before_anything_starts(tmp_path):
    fleet = _deployer(tmp_path, cwd=tmp_path / "no-such-dir")
    with pytest.raises(DeployError, match=r"cannot start: the service's directory .*no-such-dir does not exist"):
        fleet.start(Instance("p-0", "producer", "baseline", "v1"))
    assert fleet.instances() == []
