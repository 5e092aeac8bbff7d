"""The command deployer on real brokers: a fleet of Kafka containers that the product did not make its way, run by a
platform team's own script through the Docker CLI (tests/integration/fleet/kafka-node.sh). The rollout drives it only
through the spec's command templates: described from the cluster, a good change promoted, a change the broker
cannot start with rolled back by the same commands, a hanging command stopped before anything changed."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_rollout import FAST_JUDGE

from canary.cluster.node_config import is_managed
from canary.containers import env, images, nodes
from canary.containers.cluster import DockerCluster
from canary.containers.spec import CLUSTER, METRICS_PORT, VERSION
from canary.kafka.versions import BASELINE_VERSION, TARGET_VERSION
from canary.rollout.broker import BROKER, Rollout
from canary.rollout.broker.spec import load_spec
from canary.rollout.core import run_all
from canary.roundtrip import ensure_topic

pytestmark = pytest.mark.integration
NAME = f"kcc{os.getpid()}"
SCRIPT = Path(__file__).parent / "fleet" / "kafka-node.sh"
# A change preflight cannot refuse: a static key (no validate-only check) whose value is valid alone (the release's
# definitions pass it) but breaks a condition between keys that only a starting broker checks (replica.socket.timeout.ms
# must be at least the fetch wait). The broker exits at start.
CANNOT_START = {"replica.fetch.wait.max.ms": "60000"}


@pytest.fixture(scope="module")
def fleet(docker_client, tmp_path_factory) -> Iterator[dict]:
    """Three brokers and a controller as containers; each broker's identity (the variables that are no config, or
    config the deployer manages) and labels kept where the fleet's script finds them, as a team's tooling would."""
    made = DockerCluster.up(docker_client, NAME, brokers=3)
    node_dir = tmp_path_factory.mktemp("fleet")
    try:
        hosts, exporters = {}, {}
        for (role, node_id), container in nodes.find(docker_client, NAME).items():
            if role != "broker":
                continue
            spec = nodes.spec_of(docker_client, container)
            identity = {k: v for k, v in spec.environment.items() if (key := env.key_of(k)) is None or is_managed(key)}
            (node_dir / f"{spec.name}.env").write_text("".join(f"{k}={v}\n" for k, v in identity.items()))
            (node_dir / f"{spec.name}.labels").write_text(
                "".join(f"{k}={v}\n" for k, v in spec.labels.items() if k != VERSION))
            hosts[node_id] = spec.name
            exporters[node_id] = f"http://127.0.0.1:{spec.labels[METRICS_PORT]}"
        yield {"cluster": made, "nodes": node_dir, "hosts": hosts, "exporters": exporters}
    finally:
        DockerCluster.down(docker_client, NAME)
        assert not docker_client.containers.list(all=True, filters={"label": f"{CLUSTER}={NAME}"})


def cluster_section(fleet: dict, **command) -> dict:
    image = images.LOCAL.replace("{version}", "{{version}}")  # a literal {version}, for the script to fill in
    script = f"NODES={shlex.quote(str(fleet['nodes']))} KAFKA_NODE_IMAGE={image} STOP_TIMEOUT=60 {SCRIPT}"
    return {"deployer": "command", "bootstrap_servers": fleet["cluster"].bootstrap_servers,
            "command": {"brokers": fleet["hosts"], "roll": f"{script} roll {{host}} {{version}} {{config_file}}",
                        "describe": f"{script} describe {{host}}", "timeout": "3m"} | command}


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "canary.cli", *args], capture_output=True, text=True, timeout=300)


def spec_file(fleet: dict, tmp_path: Path, name: str = "rollout.json", **command) -> str:
    path = tmp_path / name
    path.write_text(json.dumps({"cluster": cluster_section(fleet, **command),
                                "change": {"config": {"num.io.threads": "6"}}, "canary": {"count": 1}}))
    return str(path)


def broker_env(docker_client, broker: int) -> dict[str, str]:
    return nodes.spec_of(docker_client, nodes.find(docker_client, NAME)[("broker", broker)]).environment


def rollout(fleet: dict, tmp_path: Path, run_id: str, change: dict, command: dict | None = None,
            **sections) -> tuple[Rollout, dict]:
    spec = load_spec({"cluster": cluster_section(fleet, **(command or {})), "change": change,
                      "canary": {"brokers": [2]},
                      "probe": {"window": "45s", "interim_interval": "10s", "rate": 50, "preflight": "3s",
                                "calibration": "12s"},
                      "broker_metrics": {"exporters": fleet["exporters"]},
                      "judge": {"engine": "inline", "config": FAST_JUDGE}, "capacity": "not_required",
                      "run_id": run_id} | sections)
    run = Rollout(spec, tmp_path / run_id)
    return run, run_all(BROKER, run)


def commands_run(run: Rollout, action: str) -> list[dict]:
    return [e for e in run.audit.entries() if e["action"] == action]


def test_the_fleet_is_described_by_its_commands_and_the_cluster(fleet) -> None:
    deployer = load_spec({"cluster": cluster_section(fleet), "change": {"config": {"num.io.threads": "6"}},
                          "canary": {"count": 1}}).cluster.open_deployer()
    brokers = deployer.brokers()
    assert [(b.broker_id, b.version, b.running, b.rack) for b in brokers] == [
        (i, BASELINE_VERSION, True, None) for i in (1, 2, 3)]
    assert brokers[0].config["num.io.threads"] == "4"  # what the broker says it runs with
    assert not {"node.id", "listeners", "log.dirs", "process.roles"} & set(brokers[0].config)
    assert deployer.controllers() == []  # not listed: not this deployer's


def test_kafka_canary_rollout_describe_shows_the_fleet_through_the_spec(fleet, tmp_path) -> None:
    done = cli("rollout", "describe", "--spec", spec_file(fleet, tmp_path), "--json")
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert (seen["deployer"], seen["capabilities"], seen["controllers"]) == ("command", ["concurrent_rolls"], [])
    assert [(b["id"], b["version"], b["running"], b["config"]["num.io.threads"]) for b in seen["brokers"]] == [
        (i, BASELINE_VERSION, True, "4") for i in (1, 2, 3)]


def test_a_change_the_broker_cannot_start_with_is_rolled_back_by_the_same_commands(docker_client, fleet,
                                                                                    tmp_path) -> None:
    before = {n: broker_env(docker_client, n) for n in (1, 2, 3)}
    run, result = rollout(fleet, tmp_path, "command-refused", {"config": CANNOT_START})
    assert (result.outcome, result.verdict) == ("ROLLBACK", "ROLLBACK"), result
    assert "deploy-canary" in result.reason and "exited with status 1" in result.reason
    assert run.state.record.steps["verify"].result["status"] == "rolled_back"
    assert {n: broker_env(docker_client, n) for n in (1, 2, 3)} == before
    failed = commands_run(run, "deployer command failed")
    assert failed and "exited at start" in failed[0]["error"] and "replica.fetch.wait.max.ms" in failed[0]["output"]
    rolled_back = [e for e in commands_run(run, "deployer command") if e["step"] == "rollback"]
    assert [e["exit_code"] for e in rolled_back] == [0] and "started on" in rolled_back[0]["output"]


def test_a_broker_that_dies_after_its_roll_returned_fails_the_roll_then_not_at_the_warm_up_timeout(docker_client,
                                                                                                  fleet, tmp_path):
    """A roll command that returns as soon as the container runs (as a script that checks nothing after start
    would): the broker refuses its config and exits a few seconds later. The rollout's describe sees it stopped
    and fails the roll at the second such answer, long before the warm-up timeout, and rolls back."""
    before = {n: broker_env(docker_client, n) for n in (1, 2, 3)}
    roll = "RETURN_AT_START=1 " + cluster_section(fleet)["command"]["roll"]
    run, result = rollout(fleet, tmp_path, "command-died", {"config": CANNOT_START}, {"roll": roll},
                          timeouts={"warm_up": "10m"})
    assert (result.outcome, result.verdict) == ("ROLLBACK", "ROLLBACK"), result
    assert "broker 2 stopped after its roll: the deployer reports its process not running" in result.reason, result
    assert run.state.record.steps["verify"].result["status"] == "rolled_back"
    assert {n: broker_env(docker_client, n) for n in (1, 2, 3)} == before


def test_a_roll_script_that_skips_an_unchanged_broker_cannot_give_the_canary_a_warm_control(docker_client, fleet,
                                                                                            tmp_path) -> None:
    """A roll script that leaves a node alone when nothing changes (as a handler that fires only on a changed file
    would) rolls the control broker, which changes nothing, without restarting it: compared warm against the cold
    canary, a harmless change would be rolled back. The broker's own start time says it was not restarted; the run
    rolls the canary back and ends UNFINISHED, the change not judged, with what to fix."""
    deployer = load_spec({"cluster": cluster_section(fleet), "change": {"config": {"num.io.threads": "6"}},
                          "canary": {"count": 1}}).cluster.open_deployer()
    control = next(b for b in deployer.brokers() if b.broker_id == 3)
    # The script's record of broker 3's config, as its own last roll left it.
    deployer.roll_broker(3, version=control.version, config=control.config, rack=None, client_delay_ms=0)
    before = {n: broker_env(docker_client, n) for n in (1, 2, 3)}
    container = nodes.find(docker_client, NAME)[("broker", 3)]
    started = container.attrs["State"]["StartedAt"]
    roll = "SKIP_UNCHANGED=1 " + cluster_section(fleet)["command"]["roll"]
    run, result = rollout(fleet, tmp_path, "command-skips", {"config": {"num.io.threads": "6"}}, {"roll": roll},
                          canary={"brokers": [2], "control": [3]})
    assert (result.outcome, result.verdict) == ("UNFINISHED", "ROLLBACK"), result
    assert "broker 3 was not restarted: its process started at" in result.reason, result
    assert "restart a broker even when its version and config are the ones it runs" in result.reason
    assert run.state.record.steps["verify"].result["status"] == "rolled_back"
    assert {n: broker_env(docker_client, n) for n in (1, 2, 3)} == before
    container.reload()
    assert container.attrs["State"]["StartedAt"] == started  # the script did leave it running
    skipped = [e for e in commands_run(run, "deployer command") if "not restarted" in e["output"]]
    assert [e["step"] for e in skipped] == ["deploy-canary"]
    assert [e["broker"] for e in commands_run(run, "broker not restarted")] == [3]


@pytest.mark.slow  # `make faults`: a whole promotion (~150 s); the rolls it makes are the ones the tests above make
def test_a_good_change_is_promoted_through_the_commands_with_no_message_lost(docker_client, fleet, tmp_path) -> None:
    run, result = rollout(fleet, tmp_path, "command-good", {"config": {"num.io.threads": "6"}})
    assert (result.outcome, result.verdict) == ("PROMOTE", "PROMOTE"), result
    assert run.state.record.steps["verify"].result["status"] == "promoted"
    assert {n: broker_env(docker_client, n)[env.variable("num.io.threads")] for n in (1, 2, 3)} == {
        1: "6", 2: "6", 3: "6"}
    assert run.state.record.steps["preflight"].result["broker_metrics"] == "deployer"
    rolls = commands_run(run, "deployer command")
    # The canary, then the control broker (canary.control: auto) restarted by the same roll command, nothing changed
    assert run.state.record.control_brokers == [3] and run.state.record.control_restarted == [3]
    control = run.state.record.steps["deploy-canary"].result["controls_restarted"]
    assert [c["broker"] for c in control] == [3] and control[0]["process_started"]  # its JVM's new start time
    assert [(e["step"], e["name"]) for e in rolls] == [("deploy-canary", "roll"), ("deploy-canary", "roll"),
                                                         ("promote", "roll"), ("promote", "roll"), ("promote", "roll")]
    steps = run.state.record.to_json()["steps"]
    assert [steps[s]["result"]["probe"]["lost"] for s in ("deploy-canary", "promote")] == [0, 0]


def test_a_hanging_command_stops_the_rollout_before_any_change(docker_client, fleet, tmp_path) -> None:
    before = {n: broker_env(docker_client, n) for n in (1, 2, 3)}
    with pytest.raises(Exception) as err:
        rollout(fleet, tmp_path, "command-hangs", {"version": TARGET_VERSION},
                {"prepare": "sleep 600 # {version}", "timeout": "2s"})
    assert "the prepare command did not finish within 2s" in str(err.value)
    assert {n: broker_env(docker_client, n) for n in (1, 2, 3)} == before


def test_a_broker_is_stopped_and_started_through_the_commands_under_the_guard(fleet, tmp_path) -> None:
    ensure_topic(fleet["cluster"].bootstrap_servers, "guarded", [1, 2, 3], min_insync=2)
    script = cluster_section(fleet)["command"]["describe"].rsplit(" describe ", 1)[0]
    spec = spec_file(fleet, tmp_path, stop=f"{script} stop {{host}}", start=f"{script} start {{host}}")
    without = cli("rollout", "stop-broker", "3", "--spec", spec_file(fleet, tmp_path, "no-stop.json"))
    assert without.returncode == 2 and "cannot stop or start a broker: add stop and start" in without.stderr

    stopped = cli("rollout", "stop-broker", "3", "--spec", spec)
    assert stopped.returncode == 0, stopped.stderr
    running = {b["id"]: b["running"] for b in json.loads(cli("rollout", "describe", "--spec", spec, "--json").stdout)[
        "brokers"]}
    assert running == {1: True, 2: True, 3: False}
    refused = cli("rollout", "stop-broker", "2", "--spec", spec)  # guarded: 'guarded' would drop below min ISR 2
    assert refused.returncode == 2 and "broker 2 was not stopped" in refused.stderr
    assert "min.insync.replicas" in refused.stderr

    started = cli("rollout", "start-broker", "3", "--spec", spec)
    assert started.returncode == 0, started.stderr
    assert "back in the ISR" in started.stdout
    assert all(b["running"] for b in json.loads(cli("rollout", "describe", "--spec", spec, "--json").stdout)[
        "brokers"])
