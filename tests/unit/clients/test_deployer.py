"""The service deployer finds the services it runs by module name alone: the sample services shipped in the package
from any working directory, and a module of one's own from `cwd`."""

from __future__ import annotations

import pytest

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
