"""The docker deployer on a real Docker engine: a cluster of containers made by `cluster up --runtime docker`,
described from the cluster itself, rolled and rolled back to exactly the spec it had, a config the broker refuses
(the previous container runs again), a missing image, a name taken by a container we did not make, no engine."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from test_rollout import FAST_JUDGE
from waiting import wait_until

from canary.containers import engine, images, nodes
from canary.containers.cluster import DockerCluster
from canary.containers.spec import CLUSTER, PREVIOUS, VERSION, ContainerSpec
from canary.errors import ClusterError, SetupError
from canary.kafka.admin import broker_facts
from canary.kafka.versions import BASELINE_VERSION, TARGET_VERSION
from canary.rollout.broker import BROKER, Rollout
from canary.rollout.broker.spec import load_spec
from canary.rollout.core import run_all
from canary.rollout.deployers.base import DockerSettings
from canary.rollout.deployers.docker import DockerDeployer

pytestmark = [pytest.mark.integration, pytest.mark.parallel]
NAME = f"kct{os.getpid()}"


@pytest.fixture(scope="module")
def cluster(docker_client) -> Iterator[DockerCluster]:
    made = DockerCluster.up(docker_client, NAME, brokers=3)
    try:
        yield made
    finally:
        DockerCluster.down(docker_client, NAME)
        assert not docker_client.containers.list(all=True, filters={"label": f"{CLUSTER}={NAME}"})
        assert not docker_client.volumes.list(filters={"label": f"{CLUSTER}={NAME}"})


@pytest.fixture
def deployer(cluster) -> DockerDeployer:
    return DockerDeployer(DockerSettings(NAME, stop_timeout=60, start_timeout=90))


def spec_now(client, role: str, node_id: int) -> ContainerSpec:
    return nodes.spec_of(client, nodes.find(client, NAME)[(role, node_id)])


def comparable(spec: ContainerSpec) -> ContainerSpec:
    return ContainerSpec(**{**spec.__dict__, "labels": {k: v for k, v in spec.labels.items() if k != PREVIOUS}})



def registered(deployer: DockerDeployer, broker_id: int) -> bool:
    """Whether the cluster lists the broker; an admin request that times out while brokers restart is a no."""
    try:
        return broker_id in broker_facts(deployer.bootstrap_servers)
    except TimeoutError:
        return False

def test_the_deployer_describes_the_containers_from_the_cluster(deployer, cluster) -> None:
    brokers = deployer.brokers()
    assert [(b.broker_id, b.version, b.running, b.rack) for b in brokers] == [
        (i, BASELINE_VERSION, True, None) for i in (1, 2, 3)]
    assert brokers[0].config["num.io.threads"] == "4"  # what the broker says it runs with
    assert not {"node.id", "listeners", "log.dirs", "process.roles"} & set(brokers[0].config)
    assert [(c.node_id, c.version, c.running) for c in deployer.controllers()] == [(3000, BASELINE_VERSION, True)]
    assert deployer.bootstrap_servers == cluster.bootstrap_servers
    metrics = deployer.broker_metrics()
    assert metrics is not None
    metrics.check()  # the agents inside our image answer
    assert {s.broker for s in metrics.sample()} == {1, 2, 3}


@pytest.mark.parametrize("version", [BASELINE_VERSION, TARGET_VERSION])
def test_the_image_carries_the_official_tools_the_compose_health_checks_run(docker_client, cluster, version) -> None:
    """docker-compose.yaml's health checks, on our image of either release: the broker's API versions and the
    controller's quorum status (the tools' classes moved between releases)."""
    image = images.ensure(docker_client, version)
    broker = nodes.spec_of(docker_client, nodes.find(docker_client, NAME)[("broker", 1)])
    controller = nodes.spec_of(docker_client, nodes.find(docker_client, NAME)[("controller", 3000)])
    for command in (f"kafka-broker-api-versions.sh --bootstrap-server 127.0.0.1:{nodes.listener_port(broker)}",
                    f"kafka-metadata-quorum.sh --bootstrap-controller 127.0.0.1:{nodes.listener_port(controller)} "
                    f"describe --status"):
        out = docker_client.containers.run(image, ["bash", "-c", f"KAFKA_HEAP_OPTS=-Xmx128m {command}"],
                                           network_mode="host", remove=True, stderr=True).decode()
        assert ("ApiVersion" in out or "Produce(0)" in out) if "api-versions" in command else "LeaderId" in out, out


def test_a_roll_changes_version_config_and_rack_and_rolling_back_restores_the_exact_spec(docker_client,
                                                                                           deployer) -> None:
    before = deployer.brokers()[1]
    original = spec_now(docker_client, "broker", 2)
    deployer.roll_broker(2, version="4.1.2", config=before.config | {"num.io.threads": "6"}, rack="canary-broker",
                         client_delay_ms=0)
    wait_until(lambda: broker_facts(deployer.bootstrap_servers).get(2, (None, {}))[0] == "canary-broker", 90,
               "broker 2 back with the canary rack")
    now = next(b for b in deployer.brokers() if b.broker_id == 2)
    assert (now.version, now.config["num.io.threads"], now.rack) == ("4.1.2", "6", "canary-broker")
    assert spec_now(docker_client, "broker", 2).image == images.image_for("4.1.2")

    deployer.roll_broker(2, version=before.version, config=before.config, rack=None, client_delay_ms=0)
    wait_until(lambda: registered(deployer, 2), 90, "broker 2 registered again")
    restored = spec_now(docker_client, "broker", 2)
    assert comparable(restored) == comparable(original)
    assert restored.healthcheck and restored.healthcheck == original.healthcheck  # docker ps still shows health
    assert restored.labels[VERSION] == BASELINE_VERSION
    assert next(b for b in deployer.brokers() if b.broker_id == 2) == before


def test_a_roll_that_changes_nothing_still_restarts_the_broker(docker_client, deployer) -> None:
    """A control broker is rolled as it is and must come back as fresh as the canary: the container is restarted
    (it once was left running, warm against a cold canary, and a no-op was rolled back), its spec and labels kept."""
    before = next(b for b in deployer.brokers() if b.broker_id == 1)
    container = nodes.find(docker_client, NAME)[("broker", 1)]
    original, started = spec_now(docker_client, "broker", 1), container.attrs["State"]["StartedAt"]
    deployer.roll_broker(1, version=before.version, config=before.config, rack=before.rack, client_delay_ms=0)
    container.reload()
    assert container.attrs["State"]["StartedAt"] != started
    assert container.attrs["RestartCount"] == 0 and container.status == "running"
    assert spec_now(docker_client, "broker", 1) == original
    wait_until(lambda: registered(deployer, 1), 90, "broker 1 registered again")
    assert next(b for b in deployer.brokers() if b.broker_id == 1) == before


def test_a_config_the_broker_refuses_puts_the_previous_container_back(docker_client, deployer) -> None:
    before = deployer.brokers()[2]
    original = spec_now(docker_client, "broker", 3)
    with pytest.raises(nodes.NodeStartError) as err:
        deployer.roll_broker(3, version=before.version, config=before.config | {"num.io.threads": "0"}, rack=None,
                             client_delay_ms=0)
    assert "exited at start" in str(err.value) and "num.io.threads" in str(err.value)
    assert "the previous container runs again" in str(err.value)
    assert comparable(spec_now(docker_client, "broker", 3)) == comparable(original)
    names = [c.name for c in docker_client.containers.list(all=True, filters={"label": f"{CLUSTER}={NAME}"})]
    assert sorted(names) == sorted([f"{NAME}-controller-3000"] + [f"{NAME}-broker-{i}" for i in (1, 2, 3)])
    wait_until(lambda: registered(deployer, 3), 90, "broker 3 registered again")


def test_a_roll_cut_off_midway_is_put_right_by_the_next(docker_client, deployer) -> None:
    before = deployer.brokers()[0]
    original = comparable(spec_now(docker_client, "broker", 1))
    names = sorted(c.name for c in docker_client.containers.list(all=True, filters={"label": f"{CLUSTER}={NAME}"}))
    # cut off after the old container was set aside, before its successor existed: the broker is down
    container = nodes.find(docker_client, NAME)[("broker", 1)]
    container.stop(timeout=60)
    container.rename(f"{container.name}{nodes.ASIDE}1")
    assert not next(b for b in deployer.brokers() if b.broker_id == 1).running
    deployer.roll_broker(1, version=before.version, config=before.config, rack=None, client_delay_ms=0)
    wait_until(lambda: registered(deployer, 1), 90, "broker 1 registered again")
    assert comparable(spec_now(docker_client, "broker", 1)) == original
    # cut off after the successor was created, before the replaced container was removed
    ContainerSpec(**{**spec_now(docker_client, "broker", 1).__dict__,
                     "name": f"{NAME}-broker-1{nodes.ASIDE}2"}).create(docker_client)
    deployer.roll_broker(1, version=before.version, config=before.config, rack=None, client_delay_ms=0)
    assert sorted(c.name for c in docker_client.containers.list(
        all=True, filters={"label": f"{CLUSTER}={NAME}"})) == names
    assert next(b for b in deployer.brokers() if b.broker_id == 1).running


def test_a_missing_image_is_named_before_anything_changes(docker_client, deployer) -> None:
    missing = DockerDeployer(DockerSettings(NAME, image="kafka-canary-missing/kafka:{version}"))
    with pytest.raises(SetupError) as err:
        missing.prepare("4.1.2")
    assert "kafka-canary-missing/kafka:4.1.2" in str(err.value) and "kafka-canary image build" in str(err.value)


def test_a_name_taken_by_a_container_we_did_not_make_is_refused_and_left_alone(docker_client) -> None:
    name = f"{NAME}x"
    foreign = docker_client.containers.run(images.JRE, ["sleep", "300"], name=f"{name}-broker-1", detach=True)
    try:
        with pytest.raises(ClusterError) as err:
            DockerCluster.up(docker_client, name, brokers=1)
        assert f"{name}-broker-1" in str(err.value) and "left alone" in str(err.value)
        foreign.reload()
        assert foreign.status == "running"
        assert not docker_client.containers.list(all=True, filters={"label": f"{CLUSTER}={name}"})
        assert DockerCluster.down(docker_client, name) == []
    finally:
        foreign.remove(force=True)


def test_an_engine_that_does_not_answer_is_named() -> None:
    with pytest.raises(engine.DockerUnavailable) as err:
        engine.connect("unix:///nonexistent/docker.sock", timeout=5)
    assert "unix:///nonexistent/docker.sock" in str(err.value) and "DOCKER_HOST" in str(err.value)


# make faults: test-compose rolls containers through this deployer in CI; the roll primitives are tested above.
@pytest.mark.slow
def test_rollouts_on_the_docker_runtime_roll_back_a_bad_canary_and_promote_an_upgrade(docker_client, deployer,
                                                                                        tmp_path) -> None:
    def rollout(run_id: str, change: dict, window: str) -> tuple[Rollout, dict]:
        spec = load_spec({"cluster": {"deployer": "docker", "docker": {"name": NAME, "stop_timeout": "60s"}},
                          "change": change, "canary": {"brokers": [2]},
                          "probe": {"window": window, "interim_interval": "10s", "rate": 50, "preflight": "3s",
                                    "calibration": "12s"},
                          "judge": {"engine": "inline", "config": FAST_JUDGE}, "capacity": "not_required",
                          "run_id": run_id})
        run = Rollout(spec, tmp_path / run_id)
        return run, run_all(BROKER, run)

    before = {n: comparable(spec_now(docker_client, "broker", n)) for n in (1, 2, 3)}
    bad, result = rollout("docker-bad", {"config": {"message.max.bytes": "100"}}, "120s")
    assert (result.outcome, result.verdict) == ("ROLLBACK", "ROLLBACK")
    assert bad.state.record.steps["verify"].result["status"] == "rolled_back"
    assert {n: comparable(spec_now(docker_client, "broker", n)) for n in (1, 2, 3)} == before

    good, result = rollout("docker-upgrade", {"version": TARGET_VERSION, "config": {"num.io.threads": "6"}}, "45s")
    assert (result.outcome, result.verdict) == ("PROMOTE", "PROMOTE"), result
    assert good.state.record.steps["verify"].result["status"] == "promoted"
    assert [(b.version, b.config["num.io.threads"], b.rack) for b in deployer.brokers()] == [
        (TARGET_VERSION, "6", None)] * 3
    assert [c.version for c in deployer.controllers()] == [TARGET_VERSION]
    steps = good.state.record.to_json()["steps"]
    lost = [steps[s]["result"]["probe"]["lost"] for s in ("deploy-canary", "promote")]
    assert lost == [0, 0]  # no acknowledged probe message lost in any roll
