"""The README's main job: the broker rollout DAG run end to end on the embedded default.

An Airflow home on SQLite in a fresh directory (`airflow db migrate`), a 4-broker local KRaft cluster carrying steady
user traffic (topic `orders`, from Kafka's own ProducerPerformance and ConsumerPerformance), the cluster's Airflow
connection, then `airflow dags test kafka_broker_canary -c '{…}'`: every task of the DAG runs for real (the probe on
real brokers, the analysis through SparkSubmitOperator on local Spark). Prints the verdict and the report's path,
stops the traffic and tears the cluster down. `bad=True` gives the canary brokers a config no
probe message fits (message.max.bytes=100): the gate rolls it back.

Airflow is driven through its CLI, never imported: canary/ stays free of Airflow. The DAGs are the project's (dags/):
the demo runs those of a checkout of the repository (project_dir). The Airflow provider they use is the installed
package's (`kafka_canary_provider`, found by Airflow through its entry points), as in a user's own Airflow.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from canary.cluster import distribution
from canary.cluster.distribution import BASELINE_VERSION, TARGET_VERSION
from canary.cluster.local import LocalCluster
from canary.cluster.traffic import TrafficSpec, UserTraffic
from canary.errors import CanaryError
from canary.outcome import Outcome
from canary.rollout.core.record import RunRecord

DAG_ID = "kafka_broker_canary"
PROJECT_ENV = "KAFKA_CANARY_PROJECT"
CONN_ID = "kafka_canary_default"
# Enough traffic for the judge in a short window (one canary partition at 50 msg/s); the first 15 s, while the
# probe's consumer joins its group, are not judged. The latency floors and no e2e p99 SLO suit a saturated shared
# 2-core machine, where both lanes' tails reach seconds (the rollout integration tests use the same); the bad
# canary's produce errors are far beyond them.
_LATENCY_FLOOR = {"rel_floor": 0.5, "abs_floor": 40.0}
FAST_JUDGE = {"warmup_s": 15, "bucket_s": 5, "metrics": {
    m: _LATENCY_FLOOR for m in ("e2e_latency_p50", "e2e_latency_p95", "produce_latency_p99")} | {
    "e2e_latency_p99": _LATENCY_FLOOR | {"slo": None}}}
# Real user traffic through the rollout (Kafka's own ProducerPerformance and ConsumerPerformance): the rollout leads
# the canary's share of every user topic, and a change that costs capacity shows in the brokers' own metrics only
# when they serve clients. 1,000 records/s of 1 kB in total (1 MB/s, acks=all) is steady work for every broker yet
# leaves most of a 2-core machine to the probe, Spark and Airflow: on 4 brokers it cost them ~0.6 CPU-s/s (0.06 idle)
# and the two tools ~0.13. Two partitions per broker, so each broker, the canary too, leads some; replication as the
# probe topic's, min(3, brokers).
USER_TOPIC = "orders"
USER_RECORDS_PER_S = 1_000
USER_RECORD_SIZE = 1_000
USER_PARTITIONS_PER_BROKER = 2
BAD_CONFIG = {"message.max.bytes": "100"}
GOOD_CONFIG = {"num.io.threads": "6"}
# What is shown of `airflow dags test` while it runs (everything goes to the log file): the rollout's own progress,
# each task's end, task errors.
_LOG_LINE = re.compile(r"^\S+T(\d\d:\d\d:\d\d)\.\d+Z \[(\w+)\s*\] (.*?)\s+\[([\w.]+)\]")
_TASK_END = re.compile(r"\[DAG TEST\] end task task_id=(\S+)")


def progress_line(line: str) -> str | None:
    """The short form of a log line worth showing, else None."""
    m = _LOG_LINE.match(line)
    if not m:
        return None
    clock, level, message, logger = m.groups()
    if end := _TASK_END.search(message):
        return f"{clock}  task {end.group(1)} ended"
    if logger == "canary.rollout" or (level == "error" and logger == "task"):
        return f"{clock}  {message[:200]}"
    return None


def demo_params(bad: bool = False, engine: str = "spark", window: str = "60s", upgrade: bool = False) -> dict:
    """The trigger-form values of the demo run: one canary broker gets num.io.threads=6 (a bad canary gets
    message.max.bytes=100 instead; `upgrade`: the canary is upgraded to the target version, plus the bad config
    for a bad one), a short window at 50 msg/s; INCONCLUSIVE rolls back without asking, since nobody is there
    to answer."""
    config = dict(BAD_CONFIG) if bad else {} if upgrade else dict(GOOD_CONFIG)
    return {"cluster_conn_id": CONN_ID, "target_version": TARGET_VERSION if upgrade else None,
            "config_overrides": config, "canary_count": 1, "window": window,
            "interim_interval": "20s", "probe_rate": 50, "preflight_probe": "3s", "calibration_probe": "12s",
            "judge_config": FAST_JUDGE,
            "engine": engine, "finalize": True, "on_inconclusive": "rollback", "client_delay_ms": 0}


def user_traffic_spec(brokers: int) -> TrafficSpec:
    """The demo's user traffic on a cluster of `brokers` brokers."""
    return TrafficSpec(USER_TOPIC, USER_RECORDS_PER_S, USER_RECORD_SIZE, USER_PARTITIONS_PER_BROKER * brokers,
                       min(3, brokers))


def project_dir(folder: str | Path | None = None) -> Path:
    """The checkout whose DAGs (dags/) Airflow runs: `folder`, else $KAFKA_CANARY_PROJECT, else the working directory
    (`make demo` runs in the checkout). Raises CanaryError when that folder has no DAGs."""
    project = Path(folder or os.environ.get(PROJECT_ENV) or Path.cwd()).resolve()
    if not (project / "dags" / f"{DAG_ID}.py").exists():
        raise CanaryError(f"{project} has no dags/{DAG_ID}.py: Airflow runs the DAGs of a checkout of the "
                          f"kafka-canary repository; run this in one, or set {PROJECT_ENV} "
                          f"(kafka-canary demo: --project DIR)")
    return project


def provider_installed() -> None:
    """Raises CanaryError when this environment lacks the Airflow provider the DAGs import (an install without the
    `airflow` extra, or one older than the provider's packaging), before Airflow reports the DAGs as missing."""
    if importlib.util.find_spec("airflow") is None or importlib.util.find_spec("kafka_canary_provider") is None:
        raise CanaryError(f"Airflow or the kafka-canary provider is not installed in {sys.prefix}: "
                          f"pip install 'kafka-canary[airflow]' (in a checkout: make setup)")


def airflow_env(home: Path, runs: Path | str, cluster_dir: Path, project: str | Path | None = None) -> dict[str, str]:
    """The environment of every `airflow` command: a private AIRFLOW_HOME on SQLite, the DAGs of the project
    checkout (project_dir(project)), the cluster's connection (JSON in AIRFLOW_CONN_*) and where rollouts keep their
    run directories. The tasks import canary and the provider from this interpreter's environment; Airflow finds
    the provider and its plugin through their entry points, so the plugins folder is the home's own (empty) one:
    pointed at plugins/, Airflow would import every file there a second time as a top-level module."""
    repo = project_dir(project)
    provider_installed()
    env = dict(os.environ)
    bin_dir = str(Path(sys.executable).parent)
    env.update({
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}",
        "AIRFLOW__CORE__DAGS_FOLDER": str(repo / "dags"),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(home / "plugins"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
        "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",
        "AIRFLOW_CONN_KAFKA_CANARY_DEFAULT": json.dumps(
            {"conn_type": "kafka_canary", "extra": {"deployer": "local", "dir": str(cluster_dir)}}),
        "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[2]"}),
        # the local Spark driver of the analysis task binds loopback, not the machine's interface address
        "SPARK_LOCAL_IP": env.get("SPARK_LOCAL_IP", "127.0.0.1"),
        "KAFKA_CANARY_RUNS": str(runs),
        "PATH": os.pathsep.join([bin_dir, env.get("PATH", "")]),
    })
    return env


def airflow_command() -> str:
    return shutil.which("airflow", path=str(Path(sys.executable).parent)) or "airflow"


def run_dag_test(env: dict[str, str], params: dict, log_path: Path, echo: bool = True,
                 timeout: float = 1800, dag_id: str = DAG_ID) -> int:
    """`airflow dags test DAG_ID -c PARAMS` (default: the broker rollout DAG), its output in `log_path`; returns its
    exit code."""
    cmd = [airflow_command(), "dags", "test", dag_id, "-c", json.dumps(params)]
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        deadline = time.monotonic() + timeout
        assert proc.stdout is not None
        for line in proc.stdout:
            log.write(line)
            shown = progress_line(line) if echo else None
            if shown:
                print("  " + shown, flush=True)
            if time.monotonic() > deadline:
                proc.kill()
                break
        return proc.wait()


def task_states(home: Path, dag_id: str = DAG_ID) -> list[tuple[str, str | None, int]]:
    """(task id, state, try number) of the newest DAG run's tasks, as Airflow recorded them, in start order."""
    with contextlib.closing(sqlite3.connect(home / "airflow.db")) as db:
        rows = db.execute(
            "SELECT task_id, state, try_number FROM task_instance WHERE dag_id = ? AND run_id = (SELECT run_id FROM "
            "dag_run WHERE dag_id = ? ORDER BY id DESC LIMIT 1) ORDER BY start_date IS NULL, start_date",
            (dag_id, dag_id))
        return [tuple(r) for r in rows]


def run_outcome(runs: Path) -> tuple[RunRecord, Path] | None:
    """The newest rollout's record under `runs` and its run directory (None when no rollout started)."""
    found = sorted(runs.glob("*/run.json"), key=lambda p: p.stat().st_mtime)
    return (RunRecord.load(json.loads(found[-1].read_text())), found[-1].parent) if found else None


def run_demo(brokers: int = 4, version: str = BASELINE_VERSION, directory: Path | None = None,
             keep: bool = False, bad: bool = False, engine: str = "spark", upgrade: bool = False,
             project: Path | None = None) -> int:
    """Returns 0 when the rollout finished and was verified (promoted, or rolled back for a bad canary). `project`:
    the checkout whose DAGs run (project_dir)."""
    project = project_dir(project)  # before anything is made
    workdir = Path(directory) if directory else Path(tempfile.mkdtemp(prefix="kafka-canary-demo-"))
    home, runs, cluster_dir = workdir / "airflow", workdir / "rollouts", workdir / "cluster"
    home.mkdir(parents=True, exist_ok=True)
    env = airflow_env(home, runs, cluster_dir, project)
    started = time.monotonic()
    print(f"demo in {workdir}: {'a BAD' if bad else 'a good'} canary ({_change_text(bad, upgrade, version)}) on a "
          f"{brokers}-broker cluster", flush=True)
    # The metadata database is set up while the brokers start: both take a while, neither needs the other.
    migrate = subprocess.Popen([airflow_command(), "db", "migrate"], env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    print(f"starting a {brokers}-broker KRaft cluster and `airflow db migrate` (SQLite in {home}) ...", flush=True)
    cluster = LocalCluster.up(cluster_dir, brokers=brokers, version=version, tie_to_parent=not keep)
    rollout_s = 0.0
    traffic: UserTraffic | None = None
    try:
        # Started while the metadata database migrates, so the traffic is steady by the rollout's preflight.
        traffic = UserTraffic(distribution.ensure(version), cluster.bootstrap_servers, user_traffic_spec(brokers),
                              workdir / "traffic")
        traffic.start()
        print(f"user traffic: {traffic.spec.describe()}; Kafka's ProducerPerformance and ConsumerPerformance, "
              f"logs in {traffic.log_dir}", flush=True)
        if not _migrated(migrate, home):
            return Outcome.ERROR.exit_code
        setup_s = time.monotonic() - started
        print(f"set up in {setup_s:.1f}s; bootstrap servers {cluster.bootstrap_servers}", flush=True)
        traffic.check()  # a rollout under traffic that already died would show nothing the demo promises
        params = demo_params(bad=bad, engine=engine, upgrade=upgrade)
        print(f"\nairflow dags test {DAG_ID} -c '{json.dumps(params)}'", flush=True)
        log_path = workdir / "dags-test.log"
        rollout_started = time.monotonic()
        code = run_dag_test(env, params, log_path)
        rollout_s = time.monotonic() - rollout_started
        found = run_outcome(runs)
        print(f"\nairflow dags test exited {code} after {rollout_s:.1f}s; full log {log_path}")
        if found is None:
            print("error: no rollout ran (see the log)")
            return Outcome.ERROR.exit_code
        record, run_dir = found
        _show_outcome(record, run_dir, home)
        # The demo shows a whole rollout: verified either way is its success; anything else stopped it unfinished.
        return 0 if code == 0 and record.status.verified else Outcome.UNFINISHED.exit_code
    finally:
        try:
            if traffic is not None:  # before the cluster goes, or the tools would report its absence
                print(traffic.stop().line(), flush=True)
        finally:
            _teardown(cluster, keep, started, rollout_s)


def _change_text(bad: bool, upgrade: bool, version: str) -> str:
    """The demo's change as its first line says it: the upgrade, the config the canary gets."""
    change = ", ".join(f"{k}={v}" for k, v in (BAD_CONFIG if bad else {} if upgrade else GOOD_CONFIG).items())
    return ", ".join(filter(None, [f"Kafka {version} → {TARGET_VERSION}" if upgrade else "", change]))


def _migrated(migrate: subprocess.Popen, home: Path) -> bool:
    """Waits for `airflow db migrate` (its output in the home's db-migrate.log); False, said, when it failed."""
    output, _ = migrate.communicate(timeout=600)
    (home / "db-migrate.log").write_text(output)
    if migrate.returncode != 0:
        print(output[-3000:])
        print(f"error: `airflow db migrate` failed (exit {migrate.returncode})")
        return False
    return True


def _show_outcome(record: RunRecord, run_dir: Path, home: Path) -> None:
    """What the rollout came to: its tasks' states, the verdict, the status and where the reports are."""
    verdict = record.verdict
    states = ", ".join(f"{t} {s or 'none'}" + (f" (try {n})" if n > 1 else "") for t, s, n in task_states(home))
    print(f"tasks:   {states}")
    print(f"VERDICT: {verdict.verdict if verdict else 'none'} ({verdict.engine if verdict else None}) — "
          f"{verdict.reason if verdict else None}")
    if verdict and verdict.traffic:
        print(f"judged:  {verdict.traffic.get('reason')}")
    print(f"status:  {record.status} (outcome {record.outcome()})")
    print(f"report:  {run_dir / 'report.html'}")
    analysis = run_dir / verdict.analysis if verdict and verdict.analysis else None
    if analysis and (analysis / "report.html").exists():
        print(f"analysis report: {analysis / 'report.html'}")


def _teardown(cluster: LocalCluster, keep: bool, started: float, rollout_s: float) -> None:
    teardown = time.monotonic()
    if keep:
        print(f"cluster left running; stop it with `kafka-canary cluster down --dir {cluster.directory}`")
    else:
        cluster.down()
    print(f"cluster down in {time.monotonic() - teardown:.1f}s; total {time.monotonic() - started:.1f}s "
          f"(rollout {rollout_s:.1f}s)")
