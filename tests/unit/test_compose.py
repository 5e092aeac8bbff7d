"""docker-compose.yaml checked for structure, fast and without an engine (tests/compose_stack brings it up for real:
`make test-compose`). Values are read as compose fills them in without an .env (the defaults)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import urlsplit

import yaml

from canary.lanes import broker_lane
from canary.rollout.core.spec import ClusterSection

REPO = Path(__file__).resolve().parents[2]
RAW = (REPO / "docker-compose.yaml").read_text()
COMPOSE = yaml.safe_load(RAW)
SERVICES = COMPOSE["services"]
AIRFLOW = ["airflow-init", "airflow-api-server", "airflow-scheduler", "airflow-dag-processor", "airflow-triggerer"]
ONE_SHOT = {"airflow-init"}
PROJECT_DIRS = ["dags", "plugins", "spark_jobs", "canary"]
# ${VAR}, ${VAR:-default}, ${VAR-default}; `$${X}` is a literal `${X}` for the container's shell.
INTERPOLATION = re.compile(r"(?<!\$)\$\{(\w+)(?::?-([^}]*))?\}")
USERINFO_PASSWORD = re.compile(r"://(?:\$\{[^}]*\}|[^:@/\s])*:((?:\$\{[^}]*\}|[^@/\s])*)@")
ENV_EXAMPLE = dict(line.split("=", 1) for line in (REPO / "deploy/env.example").read_text().splitlines()
                   if line and not line.startswith("#"))


def local(value) -> str:
    return INTERPOLATION.sub(lambda m: m.group(2) or "", str(value))


def env(name: str) -> dict[str, str]:
    return {k: local(v) for k, v in (SERVICES[name].get("environment") or {}).items()}


def lock_version(package: str) -> str:
    return re.search(rf"^{package}==(\S+)$", (REPO / "requirements.lock").read_text(), re.M).group(1)


def kafka_nodes() -> dict[str, dict[str, str]]:
    return {n: env(n) for n, s in SERVICES.items() if local(s.get("image", "")).startswith("apache/kafka:")}


def listeners(value: str) -> dict[str, tuple[str, int]]:
    """'NAME://host:port,…' → {NAME: (host, port)}."""
    parsed = {}
    for item in value.split(","):
        name, _, address = item.partition("://")
        host, _, port = address.rpartition(":")
        parsed[name] = (host, int(port))
    return parsed


def test_the_stack_has_every_service():
    assert set(SERVICES) == {*AIRFLOW, "postgres", "controller", "broker-1", "broker-2", "broker-3", "broker-4",
                             "spark-master", "spark-worker", "kafka-canary-probe", "prometheus"}
    assert SERVICES["broker-4"]["profiles"] == ["canary"]


def test_long_running_services_have_a_healthcheck_and_one_shots_do_not_restart():
    for name, service in SERVICES.items():
        if name in ONE_SHOT:
            assert "healthcheck" not in service and service["restart"] == "no", name
        else:
            test = service["healthcheck"]["test"]
            assert test[0] in ("CMD", "CMD-SHELL") and all(test[1:]), name


def test_images_match_the_pinned_versions():
    base = re.search(r"^ARG AIRFLOW_IMAGE=(\S+)$", (REPO / "deploy/Dockerfile").read_text(), re.M).group(1)
    assert base.startswith(f"apache/airflow:{lock_version('apache-airflow')}-python")
    for name in [*AIRFLOW, "kafka-canary-probe"]:
        assert (REPO / SERVICES[name]["build"]["context"] / SERVICES[name]["build"]["dockerfile"]).is_file()
    assert {local(SERVICES[n]["image"]) for n in ("spark-master", "spark-worker")} == {
        f"apache/spark:{lock_version('pyspark')}"}
    assert {local(SERVICES[n]["image"]) for n in kafka_nodes()} == {"apache/kafka:3.9.2"}


def test_airflow_services_share_the_common_env_and_mount_the_project():
    common = COMPOSE["x-airflow-common"]["environment"]
    for name in AIRFLOW:
        assert SERVICES[name]["environment"].items() >= common.items(), name
        volumes = SERVICES[name]["volumes"]
        for folder in PROJECT_DIRS:
            assert f"./{folder}:/opt/kafka-canary/{folder}:ro" in volumes, (name, folder)
        assert env(name)["AIRFLOW__CORE__DAGS_FOLDER"] == "/opt/kafka-canary/dags"
        # The provider and its plugin come from the editable install's entry points; as a plugins folder, plugins/
        # would be imported a second time, file by file, as top-level modules.
        assert "AIRFLOW__CORE__PLUGINS_FOLDER" not in env(name) and "PYTHONPATH" not in env(name), name
        assert env(name)["AIRFLOW__CORE__TEST_CONNECTION"] == "Enabled", name
    assert [s["command"] for n, s in SERVICES.items() if n in AIRFLOW[1:]] == [
        "api-server", "scheduler", "dag-processor", "triggerer"]


def test_mounts_exist_in_the_repo_or_are_declared_volumes():
    for name, service in SERVICES.items():
        for volume in service.get("volumes", []):
            source = local(volume).split(":", 1)[0]
            if source.startswith("./"):
                assert (REPO / source).exists(), (name, source)
            elif source.startswith("/"):  # the host's Docker socket: the scheduler's alone (docker deployer)
                assert name == "airflow-scheduler" and volume.endswith(":/var/run/docker.sock"), (name, volume)
            else:
                assert source in COMPOSE["volumes"], (name, source)
    for name in kafka_nodes():
        assert f"{env(name)['KAFKA_LOG_DIRS']}" in {v.split(":")[1] for v in SERVICES[name]["volumes"]}, name
    assert any(v.endswith(":/var/lib/postgresql/data") for v in SERVICES["postgres"]["volumes"])


def test_connections_are_json_with_the_right_conn_type():
    environment = env("airflow-scheduler")
    kafka = json.loads(environment["AIRFLOW_CONN_KAFKA_CANARY_DEFAULT"])
    assert kafka["conn_type"] == "kafka_canary"
    # The rollout spec's `cluster` section (KafkaCanaryHook.cluster_section() validates it with the spec's model):
    # the docker deployer on the compose brokers, found by their labels, reached on their INTERNAL listeners.
    cluster = ClusterSection.model_validate(kafka["extra"])
    assert cluster.deployer == "docker" and cluster.docker is not None
    brokers = {n: s for n, s in SERVICES.items() if (s.get("labels") or {}).get("io.kafka-canary.role") == "broker"}
    assert {s["labels"]["io.kafka-canary.cluster"] for s in brokers.values()} == {cluster.docker.name}
    assert sorted(int(s["labels"]["io.kafka-canary.node-id"]) for s in brokers.values()) == sorted(
        int(env(n)["KAFKA_NODE_ID"]) for n in brokers)
    internal = {f"{host}:{port}" for n in brokers if n != "broker-4"
                for host, port in [listeners(env(n)["KAFKA_ADVERTISED_LISTENERS"])["INTERNAL"]]}
    assert set(cluster.bootstrap_servers.split(",")) == internal
    # Only the scheduler runs tasks, so only it gets the Docker socket (and the socket's group).
    assert [n for n in AIRFLOW if "group_add" in SERVICES[n]] == ["airflow-scheduler"]
    spark = json.loads(environment["AIRFLOW_CONN_SPARK_DEFAULT"])
    assert spark["conn_type"] == "spark" and urlsplit(spark["host"]).scheme == "spark"
    master = SERVICES[urlsplit(spark["host"]).hostname]["command"]
    assert master[master.index("--port") + 1] == str(spark["port"])
    assert f"spark://spark-master:{spark['port']}" in SERVICES["spark-worker"]["command"]
    # Executors write the analysis output where the driver (the scheduler) reads it: the same volume, same path.
    runs = environment["KAFKA_CANARY_RUNS"]
    state = [v for v in SERVICES["airflow-scheduler"]["volumes"] if runs.startswith(v.split(":")[1] + "/")]
    assert state and state[0] in SERVICES["spark-worker"]["volumes"]


def test_depends_on_names_existing_services_with_sensible_conditions():
    for name, service in SERVICES.items():
        for dependency, spec in service.get("depends_on", {}).items():
            target = SERVICES[dependency]
            condition = spec["condition"]
            assert condition in ("service_started", "service_healthy", "service_completed_successfully")
            if condition == "service_healthy":
                assert "healthcheck" in target, (name, dependency)
            if condition == "service_completed_successfully":
                assert dependency in ONE_SHOT, (name, dependency)
            # A service outside a profile cannot start when it needs one that is only in a profile.
            assert not target.get("profiles") or service.get("profiles"), (name, dependency)
    for name in AIRFLOW[1:]:  # the database is migrated before any Airflow component starts
        assert SERVICES[name]["depends_on"]["airflow-init"]["condition"] == "service_completed_successfully", name


def test_kafka_cluster_is_consistent():
    nodes = kafka_nodes()
    ids = {name: int(e["KAFKA_NODE_ID"]) for name, e in nodes.items()}
    assert len(set(ids.values())) == len(ids)
    brokers = {n: e for n, e in nodes.items() if "broker" in e["KAFKA_PROCESS_ROLES"].split(",")}
    assert {ids[n] for n in brokers if not SERVICES[n].get("profiles")} == {1, 2, 3}
    for voters in {e["KAFKA_CONTROLLER_QUORUM_VOTERS"] for e in nodes.values()}:
        for voter in voters.split(","):
            node_id, _, address = voter.partition("@")
            host, _, port = address.rpartition(":")
            assert ids[host] == int(node_id) and "controller" in nodes[host]["KAFKA_PROCESS_ROLES"]
            assert listeners(nodes[host]["KAFKA_LISTENERS"])["CONTROLLER"][1] == int(port)
    for name, e in brokers.items():
        bound = listeners(e["KAFKA_LISTENERS"])
        protocols = dict(item.split(":") for item in e["KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"].split(","))
        published = {p.split(":")[0]: int(p.split(":")[1]) for p in SERVICES[name].get("ports", [])}
        for listener, (host, port) in listeners(e["KAFKA_ADVERTISED_LISTENERS"]).items():
            assert listener in bound and listener in protocols, (name, listener)
            if host == "localhost":  # for clients on the host: the listener's port must be published
                assert published[str(port)] == bound[listener][1], (name, listener)
            else:
                assert host == name and port == bound[listener][1], (name, listener)
        assert e["KAFKA_INTER_BROKER_LISTENER_NAME"] in bound
        lane = "canary" if SERVICES[name].get("profiles") == ["canary"] else "baseline"
        assert e["KAFKA_BROKER_RACK"] and broker_lane(e["KAFKA_BROKER_RACK"], "canary-broker") == lane, name


def test_prometheus_scrapes_the_probe():
    command = [local(c) for c in SERVICES["kafka-canary-probe"]["command"]]
    assert SERVICES["kafka-canary-probe"]["entrypoint"] == ["kafka-canary"] and command[0] == "probe"
    http_port = command[command.index("--http-port") + 1]
    for server in command[command.index("--bootstrap-servers") + 1].split(","):
        host, _, port = server.rpartition(":")
        assert (host, int(port)) in listeners(env(host)["KAFKA_ADVERTISED_LISTENERS"]).values(), server
    source = next(v.split(":")[0] for v in SERVICES["prometheus"]["volumes"] if v.endswith("prometheus.yml:ro"))
    config = yaml.safe_load((REPO / source).read_text())
    targets = [t for job in config["scrape_configs"] if job.get("metrics_path", "/metrics") == "/metrics"
               for group in job["static_configs"] for t in group["targets"]]
    assert f"kafka-canary-probe:{http_port}" in targets


def test_no_literal_secrets_only_documented_local_defaults():
    secret = re.compile(r"(PASSWORD|SECRET|TOKEN|_KEY)$")
    for name, service in {**SERVICES, "x-airflow-common": COMPOSE["x-airflow-common"]}.items():
        for key, value in (service.get("environment") or {}).items():
            value = str(value)
            if secret.search(key):
                assert INTERPOLATION.fullmatch(value), (name, key)
            for password in USERINFO_PASSWORD.findall(value):  # scheme://user:password@host
                assert INTERPOLATION.fullmatch(password), (name, key)
    # Every variable is documented in deploy/env.example with the very default the compose file falls back to.
    uncommented = "\n".join(line for line in RAW.splitlines() if not line.lstrip().startswith("#"))
    for variable, default in INTERPOLATION.findall(uncommented):
        assert ENV_EXAMPLE[variable] == default, variable
