"""The whole Airflow on loopback, for people who want the UI and for the live tests: `airflow standalone` (API
server with the UI, scheduler, DAG processor, triggerer; LocalExecutor on SQLite) with the project's DAGs and
plugin, the embedded cluster's connection, the cluster pool, and a known login.

Airflow is driven through its CLI and REST API, never imported: canary/ stays free of Airflow.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import requests

from canary.demo import DAG_ID, airflow_command, airflow_env
from canary.errors import CanaryError

USERNAME = "admin"
POOL = "kafka_canary_default"
# Components whose health the API reports; the stack is up when all are healthy.
COMPONENTS = ("metadatabase", "scheduler", "triggerer", "dag_processor")


class StackError(CanaryError):
    """Airflow did not come up; the message names the log to read."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stack_env(home: Path, runs: Path | str, cluster_dir: Path, port: int) -> dict[str, str]:
    """airflow_env plus what a multi-process Airflow needs: one JWT secret shared by the API server and the task
    runners, the execution API at our port, DAGs unpaused at creation, a small worker pool for a 2-core machine,
    the simple auth manager with one admin whose password lives in a file of the Airflow home, and the connection
    form's *Test* button (Airflow 3 disables connection tests unless told otherwise)."""
    env = airflow_env(home, runs, cluster_dir)
    secret_file = home / "jwt_secret"
    if not secret_file.exists():
        secret_file.write_text(secrets.token_urlsafe(64))
        secret_file.chmod(0o600)
    base = f"http://127.0.0.1:{port}"
    env.update({
        "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
        "AIRFLOW__CORE__PARALLELISM": "4",
        "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
        "AIRFLOW__CORE__AUTH_MANAGER": "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{USERNAME}:admin",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(home / "passwords.json"),
        # The one admin is the only user; a test runs KafkaCanaryHook.test_connection, which only reads metadata.
        "AIRFLOW__CORE__TEST_CONNECTION": "Enabled",
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{base}/execution/",
        "AIRFLOW__API__HOST": "127.0.0.1",
        "AIRFLOW__API__PORT": str(port),
        "AIRFLOW__API__BASE_URL": base,
        "AIRFLOW__API_AUTH__JWT_SECRET": secret_file.read_text(),
        "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "10",
        "AIRFLOW__SCHEDULER__ENABLE_HEALTH_CHECK": "True",
        # On a saturated 2-core machine the API server can take longer than the 5 s default to answer a task
        # runner; a task that never started must not fail for that.
        "AIRFLOW__WORKERS__EXECUTION_API_TIMEOUT": "60",
        "AIRFLOW__WORKERS__EXECUTION_API_RETRIES": "10",
    })
    return env


def stack_password(home: Path) -> str:
    return json.loads((home / "passwords.json").read_text())[USERNAME]


def prepare(home: Path, env: dict[str, str], password: str | None = None) -> dict[str, str]:
    """What every Airflow deployment of the project needs before its components start, with `env` (stack_env):
    the admin's password file, the database migrated, the cluster pool (one slot: one rollout task per cluster at a
    time) and the connections. Returns `env`."""
    home.mkdir(parents=True, exist_ok=True)
    passwords = home / "passwords.json"
    if password or not passwords.exists():
        passwords.write_text(json.dumps({USERNAME: password or secrets.token_urlsafe(12)}))
        passwords.chmod(0o600)
    # The connections go into the database too (as a person would add them in the UI), where the REST API,
    # and so the release hook's cluster check, sees them; the environment's copies still win for tasks.
    commands = [["db", "migrate"], ["pools", "set", POOL, "1", "one rollout task per cluster at a time"]]
    for name in ("KAFKA_CANARY_DEFAULT", "SPARK_DEFAULT"):
        commands += [["connections", "delete", name.lower()],
                     ["connections", "add", name.lower(), "--conn-json", env[f"AIRFLOW_CONN_{name}"]]]
    for cmd in commands:
        done = subprocess.run([airflow_command(), *cmd], env=env, capture_output=True, text=True, timeout=600)
        if done.returncode != 0 and cmd[1] != "delete":  # nothing to delete the first time
            (home / "setup.log").write_text(done.stdout + done.stderr)
            raise StackError(f"`airflow {' '.join(cmd[:2])}` failed (exit {done.returncode}); see "
                             f"{home / 'setup.log'}")
    return env


@dataclass
class AirflowStack:
    home: Path
    port: int
    password: str
    process: subprocess.Popen
    log_path: Path
    username: str = USERNAME

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @classmethod
    def start(cls, home: Path, runs: Path | str, cluster_dir: Path, port: int | None = None,
              password: str | None = None) -> AirflowStack:
        """Migrates the database, creates the cluster pool (one slot: one rollout task per cluster at a time),
        starts `airflow standalone` in its own process group; returns at once (see `wait_ready`)."""
        home.mkdir(parents=True, exist_ok=True)  # stack_env keeps the JWT secret there
        port = port or free_port()
        env = prepare(home, stack_env(home, runs, cluster_dir, port), password)
        log_path = home / "standalone.log"
        with open(log_path, "ab") as log:
            process = subprocess.Popen([airflow_command(), "standalone"], env=env, stdout=log,
                                       stderr=subprocess.STDOUT, start_new_session=True)
        return cls(home, port, stack_password(home), process, log_path)

    def health(self) -> dict[str, str]:
        """Component -> status as the API server reports it (empty while it is not answering)."""
        try:
            body = requests.get(f"{self.url}/api/v2/monitor/health", timeout=5).json()
        except (requests.RequestException, ValueError):
            return {}
        return {c: (body.get(c) or {}).get("status", "unknown") for c in COMPONENTS}

    def token(self) -> str:
        response = requests.post(f"{self.url}/auth/token", timeout=10,
                                 json={"username": self.username, "password": self.password})
        response.raise_for_status()
        return response.json()["access_token"]

    def wait_ready(self, timeout: float = 300.0, dag_id: str = DAG_ID) -> None:
        """Blocks until every component is healthy and `dag_id` is parsed, or raises StackError."""
        deadline = time.monotonic() + timeout
        state: object = "not started"
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise StackError(f"airflow standalone exited {self.process.returncode}; see {self.log_path}")
            health = self.health()
            if health and all(s == "healthy" for s in health.values()):
                try:
                    response = requests.get(f"{self.url}/api/v2/dags/{dag_id}", timeout=10,
                                            headers={"Authorization": f"Bearer {self.token()}"})
                except requests.RequestException as exc:
                    state = exc
                else:
                    if response.status_code == 200:
                        return
                    state = f"DAG {dag_id}: {response.status_code}"
            else:
                state = health or "API server not answering"
            time.sleep(2)
        raise StackError(f"Airflow not ready after {timeout:.0f}s ({state}); see {self.log_path}")

    def stop(self, timeout: float = 30.0) -> None:
        """SIGINT (standalone stops its components), then SIGKILL of the whole process group."""
        if self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGINT)
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                pass
            except ProcessLookupError:
                return
        with contextlib.suppress(ProcessLookupError):  # task runners left behind by a component that died
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()


def run_ui(directory: Path, brokers: int = 4, port: int = 8080) -> int:
    """The embedded cluster plus the whole Airflow with the project's DAGs, until Ctrl-C; then both stop."""
    from canary.cluster.local import LocalCluster

    home, runs, cluster_dir = directory / "airflow", directory / "rollouts", directory / "cluster"
    print(f"starting a {brokers}-broker KRaft cluster in {cluster_dir} ...", flush=True)
    cluster = LocalCluster.up(cluster_dir, brokers=brokers, tie_to_parent=True)
    stack = None
    try:
        print(f"starting Airflow (airflow standalone, SQLite in {home}, log {home / 'standalone.log'}) ...",
              flush=True)
        stack = AirflowStack.start(home, runs, cluster_dir, port=port)
        stack.wait_ready(timeout=600)
        print(f"\nAirflow is up: {stack.url}  (user {stack.username}, password in {home / 'passwords.json'})\n"
              f"  trigger DAG kafka_broker_canary from the UI; reports under {stack.url}/kafka-canary/\n"
              f"  cluster: {cluster.bootstrap_servers} (connection kafka_canary_default)\n"
              f"  release hook: AIRFLOW_URL={stack.url} AIRFLOW_USERNAME={stack.username} AIRFLOW_PASSWORD=… "
              f"kafka-canary release --cluster kafka_canary_default --wait\nCtrl-C stops everything.", flush=True)
        while stack.process.poll() is None:
            time.sleep(1)
        print(f"airflow standalone exited {stack.process.returncode}; see {stack.log_path}")
        return 1
    except KeyboardInterrupt:
        return 0
    finally:
        print("stopping Airflow and the cluster ...", flush=True)
        if stack:
            stack.stop()
        cluster.down()


def register(sub) -> None:
    p = sub.add_parser("ui", help="the embedded cluster and the whole Airflow (UI, scheduler, triggerer) with the "
                                  "project's DAGs, until Ctrl-C")
    p.add_argument("--dir", type=Path, default=Path("~/.local/state/kafka-canary/ui").expanduser(),
                   help="Airflow home, cluster and run directories (default: %(default)s)")
    p.add_argument("--brokers", type=int, default=4)
    p.add_argument("--port", type=int, default=8080, help="the API server and UI port (default 8080)")
    p.set_defaults(func=lambda args: run_ui(args.dir, brokers=args.brokers, port=args.port))
