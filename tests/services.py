"""Real servers for the distributed deployment test, each started on 127.0.0.1 from this machine's own packages and
stopped afterwards: Debian's PostgreSQL (the Airflow metadata database), Debian's redis-server (the Celery broker),
and a Spark standalone master and worker from the pyspark installation's own `spark-class`."""

from __future__ import annotations

import glob
import os
import pwd
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

from canary.process import free_port, wait_listening


def _stop(proc: subprocess.Popen, sig: int = signal.SIGTERM, timeout: float = 20) -> None:
    with suppress(ProcessLookupError):
        os.killpg(proc.pid, sig)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        with suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def _started(cmd: list[str], log: Path, port: int, what: str, **kwargs) -> subprocess.Popen:
    with open(log, "ab") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, **kwargs)
    if not wait_listening(port, 120, alive=lambda: proc.poll() is None):
        _stop(proc)
        raise AssertionError(f"{what} did not listen on {port} within 120 s:\n{log.read_text()[-3000:]}")
    return proc


@dataclass(frozen=True)
class Postgres:
    port: int
    user: str
    password: str
    database: str

    def sqlalchemy_url(self) -> str:
        return f"postgresql+psycopg2://{self.user}:{self.password}@127.0.0.1:{self.port}/{self.database}"


@contextmanager
def postgres() -> Iterator[Postgres]:
    """A private PostgreSQL server (Debian's, any version installed) with one password-protected database. The
    server runs as the `postgres` user when the tests run as root (initdb refuses root); its directory is one that
    user can reach, removed afterwards."""
    initdb = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    assert initdb, "PostgreSQL is missing: `make test-distributed` installs it (apt-get install postgresql)"
    bindir = Path(initdb[-1]).parent
    directory = Path(tempfile.mkdtemp(prefix="kafka-canary-pg-"))
    as_user: dict = {}
    if os.geteuid() == 0:
        owner = pwd.getpwnam("postgres")
        os.chown(directory, owner.pw_uid, owner.pw_gid)
        as_user = {"user": owner.pw_uid, "group": owner.pw_gid, "extra_groups": []}
    server = Postgres(free_port(), "airflow", secrets.token_urlsafe(16), "airflow")
    pwfile = directory / "pwfile"
    pwfile.write_text(server.password)
    if as_user:
        os.chown(pwfile, as_user["user"], as_user["group"])
    data = directory / "data"
    done = subprocess.run([str(bindir / "initdb"), "-D", str(data), "-U", server.user, f"--pwfile={pwfile}",
                           "-A", "scram-sha-256", "-E", "UTF8"], capture_output=True, text=True, **as_user)
    assert done.returncode == 0, f"initdb failed:\n{done.stdout}{done.stderr}"
    pwfile.unlink()
    proc = _started([str(bindir / "postgres"), "-D", str(data), "-h", "127.0.0.1", "-p", str(server.port),
                     "-k", str(directory), "-c", "max_connections=200", "-c", "fsync=off"],
                    directory / "postgres.log", server.port, "PostgreSQL", **as_user)
    try:
        env = {**os.environ, "PGPASSWORD": server.password}
        created = subprocess.run([str(bindir / "createdb"), "-h", "127.0.0.1", "-p", str(server.port),
                                  "-U", server.user, server.database], env=env, capture_output=True, text=True)
        assert created.returncode == 0, f"createdb failed: {created.stderr}"
        yield server
    finally:
        _stop(proc, signal.SIGINT)  # fast shutdown
        shutil.rmtree(directory, ignore_errors=True)


@contextmanager
def redis(directory: Path) -> Iterator[str]:
    """Debian's redis-server on loopback, nothing persisted; yields its URL."""
    binary = shutil.which("redis-server") or "/usr/bin/redis-server"
    assert Path(binary).exists(), "redis-server is missing: `make test-distributed` installs it"
    port = free_port()
    proc = _started([binary, "--bind", "127.0.0.1", "--port", str(port), "--save", "", "--appendonly", "no",
                     "--dir", str(directory)], directory / "redis.log", port, "redis-server")
    try:
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        _stop(proc)


@contextmanager
def spark_standalone(directory: Path, cores: int = 2, memory: str = "2g") -> Iterator[str]:
    """A Spark standalone master and one worker, started with the pyspark installation's own `spark-class`;
    yields the master URL (spark://127.0.0.1:port)."""
    import pyspark

    spark_class = Path(pyspark.__file__).parent / "bin" / "spark-class"
    directory.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable,
           "SPARK_LOG_DIR": str(directory), "SPARK_WORKER_DIR": str(directory / "work")}
    port = free_port()
    master = _started([str(spark_class), "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                       "--port", str(port), "--webui-port", str(free_port())],
                      directory / "master.log", port, "the Spark master", env=env)
    url = f"spark://127.0.0.1:{port}"
    worker_port = free_port()
    try:
        worker = _started([str(spark_class), "org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1",
                           "--port", str(worker_port), "--webui-port", str(free_port()), "--cores", str(cores),
                           "--memory", memory, "--work-dir", str(directory / "work")],
                          directory / "worker.log", worker_port, "the Spark worker", env=env)
        try:
            yield url
        finally:
            _stop(worker)
    finally:
        _stop(master)
