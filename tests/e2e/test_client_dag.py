"""The client rollout DAG end to end: `airflow dags test kafka_client_canary` on a real local cluster whose broker 3
is the standing canary broker, with the sample service's fleet started by `kafka-canary client-rollout baseline`
(real processes), every task executed by Airflow and the lanes compared by the Spark analysis job: a good v2 is
promoted to every instance, the lane is closed again and every acknowledged record was processed."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from conftest import running_cluster

from canary.clients.deployer import ServiceDeployer
from canary.demo import airflow_command, airflow_env, run_dag_test, run_outcome
from canary.kafka.admin import TopicAdmin
from canary.lanes import canary_rack

pytestmark = [pytest.mark.integration, pytest.mark.e2e]

TOPIC = "orders"
# Broker 3 (the canary broker) hosts a replica of every partition and leads none: no canary partition yet.
ASSIGNMENT = [[1, 2, 3], [2, 1, 3], [1, 3, 2], [2, 3, 1]]
SERVICE = {"service_name": "orders", "topic": TOPIC, "group": "orders-billing", "producers": 1, "consumers": 2,
           "rate": 20}


def _cli(*args: str, spec: Path, run_dir: Path) -> dict:
    done = subprocess.run([sys.executable, "-m", "canary.cli", "client-rollout", *args, "--spec", str(spec),
                           "--run-dir", str(run_dir), "--json"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return json.loads(done.stdout)


def _fleet_records(fleet: Path) -> tuple[set[str], set[str]]:
    acked, processed = set(), set()
    for path in fleet.glob("*.records.jsonl"):
        ids = {json.loads(line)["id"] for line in path.read_text().splitlines() if line.strip()}
        (acked if "-producer-" in path.name else processed).update(ids)
    return acked, processed


def test_good_client_version_is_promoted_by_the_dag(run_root, tmp_path):
    with running_cluster("client-dag", brokers=3, racks=["a", "b", canary_rack(None)]) as cluster:
        admin = TopicAdmin(cluster.bootstrap_servers)
        assert admin.create_topic(TOPIC, ASSIGNMENT, {"min.insync.replicas": "2"})
        home, runs, fleet = tmp_path / "airflow", tmp_path / "rollouts", run_root / "client-dag-fleet"
        home.mkdir()
        env = airflow_env(home, runs, cluster.directory)
        migrate = subprocess.Popen([airflow_command(), "db", "migrate"], env=env, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, text=True)
        # The service as it runs before any rollout, started the way an operator would.
        spec = tmp_path / "fleet.yaml"
        spec.write_text(yaml.safe_dump({
            "cluster": {"dir": str(cluster.directory)},
            "service": {"name": "orders", "topic": TOPIC, "group": "orders-billing", "dir": str(fleet),
                        "producers": 1, "consumers": 2, "rate": 20},
            "change": {"from": "v1", "to": "v2"}}))
        try:
            started = _cli("baseline", spec=spec, run_dir=tmp_path / "fleet-run")
            assert len(started["fleet"]) == 3, started
            output, _ = migrate.communicate(timeout=600)
            assert migrate.returncode == 0, output[-3000:]

            params = SERVICE | {"fleet_dir": str(fleet), "from_version": "v1", "to_version": "v2",
                                "canary_partitions": 1, "window": "30s", "interim_interval": "10s",
                                "engine": "spark", "on_inconclusive": "rollback"}
            began = time.monotonic()
            code = run_dag_test(env, params, tmp_path / "dags-test.log", echo=False, timeout=900,
                                dag_id="kafka_client_canary")
            log = (tmp_path / "dags-test.log").read_text()
            found = run_outcome(runs)
            assert code == 0 and found is not None, log[-5000:]
            outcome = found[0].to_json()  # as run.json holds it
            print(f"\nclient DAG: {outcome['status']} in {time.monotonic() - began:.0f}s, verdict "
                  f"{outcome['verdict']}")
            assert outcome["verdict"]["engine"] == "spark", outcome["verdict"]
            assert outcome["status"] == "verified promoted", json.dumps(outcome["steps"], indent=1)[-3000:]
            assert "[DAG TEST] end task task_id=report" in log
            assert (runs / outcome["run_id"] / "report.html").exists()
            # Every instance on v2 and running, the canary instance gone, the lane closed (broker 3 leads nothing).
            fleet_now = ServiceDeployer(fleet, cluster.bootstrap_servers, topic=TOPIC, group="orders-billing")
            assert {s.instance.name: (s.instance.version, s.running) for s in fleet_now.instances()} == {
                "orders-producer-0": ("v2", True), "orders-consumer-0": ("v2", True),
                "orders-consumer-1": ("v2", True)}
            state = admin.observe(TOPIC)
            assert [s.replicas for _, s in sorted(state.partitions.items())] == [tuple(r) for r in ASSIGNMENT]
            assert 3 not in {s.leader for s in state.partitions.values()}
            assert outcome["steps"]["verify"]["result"]["version"] == "v2"
        finally:
            _cli("stop-fleet", spec=spec, run_dir=tmp_path / "fleet-run")
        acked, processed = _fleet_records(fleet)
        print(f"client DAG: {len(acked)} records acknowledged, {len(processed)} processed")
        assert acked and processed
