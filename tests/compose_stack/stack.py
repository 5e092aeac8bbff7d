"""docker-compose.yaml brought up for real, on this machine's rule that all traffic stays on 127.0.0.1: the main file
without its published ports, and an override file that puts every service on the host's network, gives each
listener its own free port and names 127.0.0.1 where the main file names a service. The main file stays what users
run; only addresses and ports change here, plus a metrics agent on each broker (our Kafka image carries one; the
official image does not)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import docker
import yaml

from canary.cluster import layout
from canary.containers import images

REPO = Path(__file__).resolve().parents[2]
BROKERS = (1, 2, 3)
AIRFLOW = ("airflow-init", "airflow-api-server", "airflow-scheduler", "airflow-dag-processor", "airflow-triggerer")
# Every service but the one-shot airflow-init: each has a health check.
LONG_RUNNING = {*AIRFLOW[1:], "postgres", "controller", *(f"broker-{b}" for b in BROKERS), "spark-master",
                "spark-worker", "kafka-canary-probe", "prometheus"}
LOCAL = "127.0.0.1"


def compose_command() -> list[str]:
    """Compose v2 (`docker compose`) when the engine's CLI has it, else Debian's docker-compose v1."""
    if shutil.which("docker") and subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0:
        return ["docker", "compose"]
    found = shutil.which("docker-compose")
    if not found:
        raise RuntimeError("no Docker Compose: install Debian's docker-compose (or Compose v2)")
    return [found]


@dataclass(frozen=True)
class Ports:
    postgres: int
    api: int
    scheduler_health: int
    worker_logs: int
    trigger_logs: int
    controller: int
    internal: dict[int, int]    # broker id -> INTERNAL listener (what Airflow and the probe use)
    host: dict[int, int]        # broker id -> HOST listener
    metrics: dict[int, int]     # broker id -> its metrics agent
    spark: int
    spark_ui: int
    spark_worker_ui: int
    probe: int
    prometheus: int

    @classmethod
    def free(cls) -> Ports:
        p = iter(layout.free_ports(11 + 3 * len(BROKERS)))
        return cls(next(p), next(p), next(p), next(p), next(p), next(p), {b: next(p) for b in BROKERS},
                   {b: next(p) for b in BROKERS}, {b: next(p) for b in BROKERS}, next(p), next(p), next(p), next(p),
                   next(p))

    @property
    def bootstrap(self) -> str:
        return ",".join(f"{LOCAL}:{port}" for port in self.internal.values())


def _health(*test: str) -> dict:
    return {"test": ["CMD", *test]}


def _listening(port: int) -> dict:
    return _health("bash", "-c", f"exec 3<>/dev/tcp/{LOCAL}/{port}")


def override(ports: Ports, prometheus_config: Path, docker_socket: str, docker_gid: int) -> dict:
    """The override file's content for `ports`."""
    voters = f"3000@{LOCAL}:{ports.controller}"
    airflow_env = {
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"postgresql+psycopg2://airflow:airflow@{LOCAL}:{ports.postgres}/airflow",
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://{LOCAL}:{ports.api}/execution/",
        "AIRFLOW__SCHEDULER__SCHEDULER_HEALTH_CHECK_SERVER_PORT": str(ports.scheduler_health),
        "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(ports.worker_logs),
        "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(ports.trigger_logs),
        "AIRFLOW_CONN_KAFKA_CANARY_DEFAULT": json.dumps({"conn_type": "kafka_canary", "extra": {
            "deployer": "docker", "docker": {"name": "compose"}, "bootstrap_servers": ports.bootstrap,
            "client": {"security.protocol": "PLAINTEXT"}}}),
        "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": f"spark://{LOCAL}",
                                                  "port": ports.spark, "extra": {"deploy-mode": "client"}}),
    }
    services: dict[str, dict] = {name: {"network_mode": "host", "environment": dict(airflow_env)} for name in AIRFLOW}
    services["airflow-api-server"] |= {
        "command": ["api-server", "--port", str(ports.api)],
        "healthcheck": _health("curl", "--fail", "--silent", f"http://{LOCAL}:{ports.api}/api/v2/monitor/health")}
    services["airflow-scheduler"] |= {
        "healthcheck": _health("curl", "--fail", "--silent", f"http://{LOCAL}:{ports.scheduler_health}/health"),
        "volumes": [f"{docker_socket}:/var/run/docker.sock"], "group_add": [str(docker_gid)]}
    services["postgres"] = {"network_mode": "host", "environment": {"PGPORT": str(ports.postgres)},
                            "command": ["postgres", "-c", f"listen_addresses={LOCAL}"]}
    services["controller"] = {
        "network_mode": "host",
        "environment": {"KAFKA_LISTENERS": f"CONTROLLER://{LOCAL}:{ports.controller}",
                        "KAFKA_CONTROLLER_QUORUM_VOTERS": voters},
        "healthcheck": _listening(ports.controller)}
    for b in BROKERS:
        listeners = f"INTERNAL://{LOCAL}:{ports.internal[b]},HOST://{LOCAL}:{ports.host[b]}"
        agent = f"{images.METRICS_AGENT}={LOCAL}:{ports.metrics[b]}:{images.METRICS_CONFIG}"
        services[f"broker-{b}"] = {
            "network_mode": "host",
            "environment": {"KAFKA_LISTENERS": listeners, "KAFKA_ADVERTISED_LISTENERS": listeners,
                            "KAFKA_CONTROLLER_QUORUM_VOTERS": voters, "KAFKA_OPTS": f"-javaagent:{agent}",
                            "KAFKA_HEAP_OPTS": "-Xms256m -Xmx256m"},
            "labels": {"io.kafka-canary.metrics-port": str(ports.metrics[b])},
            "healthcheck": _listening(ports.internal[b])}
    services["spark-master"] = {
        "network_mode": "host",
        "command": ["/opt/spark/bin/spark-class", "org.apache.spark.deploy.master.Master", "--host", LOCAL,
                    "--port", str(ports.spark), "--webui-port", str(ports.spark_ui)],
        "healthcheck": _listening(ports.spark)}
    services["spark-worker"] = {
        "network_mode": "host",
        "command": ["/opt/spark/bin/spark-class", "org.apache.spark.deploy.worker.Worker", "--host", LOCAL,
                    "--cores", "1", "--memory", "1g", "--work-dir", "/tmp/spark-work",
                    "--webui-port", str(ports.spark_worker_ui), f"spark://{LOCAL}:{ports.spark}"],
        "healthcheck": _listening(ports.spark_worker_ui)}
    services["kafka-canary-probe"] = {
        "network_mode": "host",
        "command": ["probe", "--bootstrap-servers", ports.bootstrap, "--http-port", str(ports.probe),
                    "--rate", "5"],
        "healthcheck": _health("curl", "--fail", "--silent", f"http://{LOCAL}:{ports.probe}/readiness")}
    services["prometheus"] = {
        "network_mode": "host",
        "command": ["--config.file=/etc/prometheus/prometheus.yml", "--storage.tsdb.path=/prometheus",
                    f"--web.listen-address={LOCAL}:{ports.prometheus}"],
        "volumes": [f"{prometheus_config}:/etc/prometheus/prometheus.yml:ro"],
        "healthcheck": _health("wget", "-q", "-O", "/dev/null", f"http://{LOCAL}:{ports.prometheus}/-/ready")}
    return {"services": services}


def without_ports(main: Path) -> dict:
    """The main file with no published ports: they cannot go with the host's network, and an override file cannot
    take a key away (Compose v1)."""
    compose = yaml.safe_load(main.read_text())
    for service in compose["services"].values():
        service.pop("ports", None)
    return compose


def prometheus_config(ports: Ports) -> str:
    """deploy/prometheus/prometheus.yml with the probe's address on this network."""
    config = yaml.safe_load((REPO / "deploy" / "prometheus" / "prometheus.yml").read_text())
    for job in config["scrape_configs"]:
        for static in job["static_configs"]:
            static["targets"] = [f"{LOCAL}:{ports.probe}" if t.startswith("kafka-canary-probe:")
                                 else f"{LOCAL}:{ports.prometheus}" for t in static["targets"]]
    return yaml.safe_dump(config)


@dataclass
class Stack:
    """One compose project of docker-compose.yaml plus its override, in `workdir`."""
    workdir: Path
    environment: dict[str, str]
    ports: Ports
    project: str = "kcstack"
    command: list[str] = field(default_factory=compose_command)

    @classmethod
    def write(cls, workdir: Path, image_environment: dict[str, str]) -> Stack:
        ports = Ports.free()
        socket = "/var/run/docker.sock"
        (workdir / "prometheus.yml").write_text(prometheus_config(ports))
        (workdir / "compose.yaml").write_text(yaml.safe_dump(without_ports(REPO / "docker-compose.yaml")))
        (workdir / "override.yaml").write_text(yaml.safe_dump(
            override(ports, workdir / "prometheus.yml", socket, os.stat(socket).st_gid)))
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "KAFKA_CANARY"))}
        return cls(workdir, env | image_environment, ports)

    def compose(self, *args: str, timeout: float = 900, check: bool = True) -> subprocess.CompletedProcess:
        done = subprocess.run([*self.command, "--project-name", self.project, "--project-directory", str(REPO),
                               "-f", str(self.workdir / "compose.yaml"), "-f", str(self.workdir / "override.yaml"),
                               *args], env=self.environment, cwd=REPO, capture_output=True, text=True,
                              timeout=timeout)
        if check and done.returncode != 0:
            raise AssertionError(f"compose {' '.join(args)} exited {done.returncode}: "
                                 f"{(done.stderr or done.stdout)[-3000:]}")
        return done

    def containers(self, client: docker.DockerClient) -> dict[str, docker.models.containers.Container]:
        """service name -> its container (the compose project's, by compose's own labels)."""
        found = client.containers.list(all=True, filters={"label": f"com.docker.compose.project={self.project}"})
        return {c.labels["com.docker.compose.service"]: c for c in found}

    def wait_healthy(self, client: docker.DockerClient, services: set[str], timeout: float = 900) -> float:
        """Seconds until every long-running service reports healthy; AssertionError naming the laggards."""
        started = time.monotonic()
        while True:
            containers = self.containers(client)
            states = {}
            for name in services:
                c = containers.get(name)
                if c is not None:
                    c.reload()
                states[name] = (c.attrs["State"].get("Health") or {}).get("Status") if c else "missing"
            if all(s == "healthy" for s in states.values()):
                return time.monotonic() - started
            if time.monotonic() - started > timeout:
                logs = self.compose("logs", "--no-color", "--tail", "30", check=False).stdout
                raise AssertionError(f"not healthy after {timeout:.0f}s: "
                                     f"{ {n: s for n, s in states.items() if s != 'healthy'} }\n{logs[-6000:]}")
            time.sleep(3)

    def up(self) -> None:
        """`up -d`; when a service fails to start, the error carries every service's last log lines."""
        done = self.compose("up", "-d", check=False)
        if done.returncode != 0:
            logs = self.compose("logs", "--no-color", "--tail", "25", check=False).stdout
            raise AssertionError(f"compose up exited {done.returncode}: {done.stderr[-2000:]}\n{logs[-8000:]}")

    def down(self) -> None:
        self.compose("down", "-v", "--remove-orphans", "--timeout", "30", check=False)
