"""Airflow as production runs it, on loopback: its components as separate processes (API server, scheduler, DAG
processor, triggerer) on a PostgreSQL metadata database, and the CeleryExecutor with Redis as its broker and Celery
workers that share no directory with each other or with the rest: each its own HOME, TMPDIR, working directory,
AIRFLOW_HOME and log folder, and its own name (the task instances' hostname, through Airflow's hostname_callable).
The rollout's run storage is an object store every process reaches; the code (the project checkout and its venv)
is what each machine would have installed.

Tasks are put on queues by a cluster policy in the control plane's airflow_local_settings.py (QUEUES): the way an
operator routes tasks to workers without changing the DAGs.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path

from canary.airflow_stack import AirflowStack, free_port, prepare, stack_env, stack_password
from canary.analysis.connector import cache_dir
from canary.demo import airflow_command

POLICY = '''"""Routes tasks to Celery queues by task id (KAFKA_CANARY_TEST_QUEUES, JSON)."""
import json
import os

QUEUES = json.loads(os.environ.get("KAFKA_CANARY_TEST_QUEUES", "{}"))


def task_policy(task):
    if task.task_id in QUEUES:
        task.queue = QUEUES[task.task_id]
'''
IDENTITY = '''"""The task instances' hostname: the worker's name, as distinct machines would have."""
import os


def hostname():
    return os.environ.get("KAFKA_CANARY_TEST_WORKER", "control-plane")
'''
CONTROL = ("api-server", "scheduler", "dag-processor", "triggerer")


@dataclass
class Worker:
    name: str
    queues: list[str]
    root: Path
    process: subprocess.Popen | None = None

    @property
    def log(self) -> Path:
        return self.root / "worker.log"


@dataclass
class CeleryAirflow:
    stack: AirflowStack
    env: dict[str, str]
    root: Path
    workers: dict[str, Worker] = field(default_factory=dict)
    control: list[subprocess.Popen] = field(default_factory=list)

    @classmethod
    def start(cls, root: Path, runs_url: str, cluster_dir: Path, *, database_url: str, broker_url: str,
              spark_master: str, queues: dict[str, str], extra_env: dict[str, str]) -> CeleryAirflow:
        home = root / "control" / "airflow"
        config = home / "config"
        config.mkdir(parents=True)
        (config / "airflow_local_settings.py").write_text(POLICY)
        (config / "worker_identity.py").write_text(IDENTITY)
        port = free_port()
        host, spark_port = spark_master.removeprefix("spark://").rsplit(":", 1)
        env = stack_env(home, runs_url, cluster_dir, port) | extra_env | {
            "AIRFLOW__CORE__EXECUTOR": "CeleryExecutor",
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": database_url,
            "AIRFLOW__CELERY__BROKER_URL": broker_url,
            "AIRFLOW__CELERY__RESULT_BACKEND": "db+" + database_url,
            "AIRFLOW__CELERY__WORKER_CONCURRENCY": "2",
            "AIRFLOW__OPERATORS__DEFAULT_QUEUE": next(iter(queues.values())),
            # A worker that died is noticed after 30 s without a heartbeat (default 5 min); its task is retried.
            "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT": "30",
            "AIRFLOW__CORE__HOSTNAME_CALLABLE": "worker_identity.hostname",
            "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": f"spark://{host}",
                                                      "port": int(spark_port)}),
            "KAFKA_CANARY_TEST_QUEUES": json.dumps(queues),
            "PYTHONPATH": os.pathsep.join(filter(None, [str(config), os.environ.get("PYTHONPATH")])),
        }
        prepare(home, env)
        control = [cls._spawn([airflow_command(), component], env, home.parent, root / "control" / f"{component}.log")
                   for component in CONTROL]
        stack = AirflowStack(home, port, stack_password(home), control[0], root / "control" / "api-server.log")
        return cls(stack, env, root, control=control)

    def start_worker(self, name: str, queues: list[str]) -> Worker:
        """A Celery worker with a home of its own; the Spark connector's jars copied into its own cache, as a
        worker machine's image would hold them."""
        root = self.root / name
        home, tmp, work, airflow_home = root / "home", root / "tmp", root / "work", root / "airflow"
        for d in (home, tmp, work, airflow_home):
            d.mkdir(parents=True, exist_ok=True)
        cache = home / ".cache" / "kafka-canary"
        for jars in cache_dir().glob("spark-kafka-*"):
            shutil.copytree(jars, cache / jars.name, dirs_exist_ok=True)
        env = self.env | {
            "HOME": str(home), "TMPDIR": str(tmp), "AIRFLOW_HOME": str(airflow_home),
            "AIRFLOW__LOGGING__BASE_LOG_FOLDER": str(root / "logs"), "KAFKA_CANARY_CACHE": str(cache),
            "KAFKA_CANARY_TEST_WORKER": name, "PWD": str(work),
        }
        env.pop("KAFKA_CANARY_WORKDIR", None)  # the default: under the worker's own HOME
        worker = Worker(name, queues, root)
        worker.process = self._spawn([airflow_command(), "celery", "worker", "--queues", ",".join(queues),
                                      "--celery-hostname", f"{name}@%h", "--concurrency", "2",
                                      "--skip-serve-logs"], env, work, worker.log)
        self.workers[name] = worker
        return worker

    def add_queue(self, worker: str, queue: str) -> None:
        """What an operator does when a worker machine is lost: another worker takes over its queue."""
        celery = str(Path(sys.executable).parent / "celery")
        name = self._celery_name(worker)
        done = subprocess.run([celery, "--app", "airflow.providers.celery.executors.celery_executor.app", "control",
                               "add_consumer", queue, "--destination", name],
                              env=self.env, capture_output=True, text=True, timeout=120)
        said = done.stdout + done.stderr  # "-> worker-b@host: OK\n    add consumer queue_a"
        assert done.returncode == 0 and f"{name}: OK" in said and "consum" in said, said

    def _celery_name(self, worker: str) -> str:
        import socket

        return f"{worker}@{socket.gethostname()}"

    def kill_worker(self, name: str) -> None:
        """SIGKILL of the worker and everything it started: the machine is gone."""
        process = self.workers[name].process
        assert process is not None
        with suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()

    @staticmethod
    def _spawn(cmd: list[str], env: dict[str, str], cwd: Path, log: Path) -> subprocess.Popen:
        with open(log, "ab") as out:
            return subprocess.Popen(cmd, env=env, cwd=cwd, stdout=out, stderr=subprocess.STDOUT,
                                    start_new_session=True)

    def stop(self) -> None:
        processes = [w.process for w in self.workers.values() if w.process] + self.control
        for process in processes:
            with suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
        for process in processes:
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                with suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait()
