"""The docker deployer when its engine stops answering mid-rollout: an infrastructure failure (the run ends
UNFINISHED, exit 4), not a judgment of the change; an engine's own refusal stays what it was."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import requests
from docker.errors import APIError

from canary.containers.engine import DockerUnavailable, EngineUnreachable
from canary.errors import InfrastructureError
from canary.rollout.deployers.docker import DockerDeployer


def deployer_whose_engine(raises: Exception) -> DockerDeployer:
    """A docker deployer (no engine contacted) whose client's container list raises `raises`."""
    def fail(**_):
        raise raises
    deployer = DockerDeployer.__new__(DockerDeployer)
    deployer.settings = SimpleNamespace(name="prod-eu")
    deployer.engine_at = "ssh://ops@engine-1"
    deployer.client = SimpleNamespace(containers=SimpleNamespace(list=fail))
    return deployer


@pytest.mark.parametrize("lost", [
    requests.exceptions.ConnectionError("('Connection aborted.', ConnectionResetError(104))"),
    requests.exceptions.ReadTimeout("UnixHTTPConnectionPool(host='localhost', port=None): Read timed out."),
])
def test_an_engine_that_stops_answering_is_the_road_not_the_change(lost):
    with pytest.raises(EngineUnreachable, match=r"the Docker engine at ssh://ops@engine-1 stopped answering during "
                                                r"brokers .*run the step again") as raised:
        deployer_whose_engine(lost).brokers()
    assert isinstance(raised.value, InfrastructureError)


def test_an_engine_that_answers_with_a_refusal_is_not_infrastructure():
    with pytest.raises(APIError) as raised:
        deployer_whose_engine(APIError("409 Conflict: name in use")).brokers()
    assert not isinstance(raised.value, InfrastructureError)


def test_no_engine_at_the_start_is_infrastructure_too():
    assert issubclass(DockerUnavailable, InfrastructureError)
