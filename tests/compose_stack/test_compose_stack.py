"""docker-compose.yaml up for real (`make test-compose`): every service on locally built images, healthy; then the
broker rollout DAG triggered through the stack's Airflow REST API (`kafka-canary release`, as a release pipeline
does) rolls the compose brokers with the docker deployer from inside the scheduler's container: a good config
change is promoted and verified, a bad one rolled back and verified, no acknowledged probe message lost; then the
whole project is torn down (containers, volumes, networks)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests
from live_airflow import rolls, timeline

from canary.containers import env
from canary.demo import BAD_CONFIG, GOOD_CONFIG, demo_params
from compose_stack import stack_images
from compose_stack.stack import LOCAL, LONG_RUNNING, Stack

pytestmark = pytest.mark.compose

DAG = "kafka_broker_canary"
RUNS = "/opt/airflow/kafka-canary/runs"


@pytest.fixture(scope="module")
def stack(docker_client, tmp_path_factory):
    started = time.monotonic()
    built = stack_images.build(docker_client, Path.home() / ".cache" / "kafka-canary")
    print(f"\nstack images built or found: {time.monotonic() - started:.0f} s", flush=True)
    s = Stack.write(tmp_path_factory.mktemp("compose"), built.environment())
    s.down()  # what an earlier, killed run may have left
    started = time.monotonic()
    try:
        s.up()
        healthy = s.wait_healthy(docker_client, LONG_RUNNING)
        print(f"compose stack up to healthy: {time.monotonic() - started:.0f} s ({healthy:.0f} s after `up -d` "
              f"returned)", flush=True)
        yield s
    finally:
        s.down()
        assert not s.containers(docker_client), "compose down left containers behind"
        project = {"label": f"com.docker.compose.project={s.project}"}
        left = [v.name for v in docker_client.volumes.list(filters=project)]
        assert not left, f"compose down -v left volumes {left}"


def _airflow_ready(s: Stack, timeout: float = 300) -> None:
    """The DAG parsed by the dag processor and unpaused (new DAGs start paused in the compose file)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done = s.compose("exec", "-T", "airflow-scheduler", "airflow", "dags", "unpause", DAG, check=False)
        if done.returncode == 0:
            return
        time.sleep(5)
    raise AssertionError(f"the DAG {DAG} never showed up: {done.stdout[-1500:]}{done.stderr[-1500:]}")


def _release(s: Stack, config: dict[str, str]) -> tuple[int, str]:
    """`kafka-canary release` with the demo's short window and fast judge, the analysis in-process (the compose
    Spark cluster's run is issue 18's), on a config change of one canary broker."""
    # The stack's cluster carries no traffic of its own: the probe alone judges (capacity: not_required).
    params = demo_params(engine="inline") | {"config_overrides": config, "capacity": "not_required"}
    del params["cluster_conn_id"]  # the connection the compose file defines: --cluster
    environment = s.environment | {"AIRFLOW_USERNAME": "admin", "AIRFLOW_PASSWORD": "admin"}
    started = time.monotonic()
    done = subprocess.run([str(Path(sys.executable).parent / "kafka-canary"), "release", "--cluster",
                           "kafka_canary_default", "--skip-cluster-check",
                           *(arg for k, v in params.items() for arg in ("--param", f"{k}={json.dumps(v)}")),
                           "--airflow-url", f"http://{LOCAL}:{s.ports.api}", "--wait", "--poll", "3",
                           "--timeout", "15m"], env=environment, capture_output=True, text=True, timeout=1200)
    print(f"release {config}: exit {done.returncode} after {time.monotonic() - started:.0f} s", flush=True)
    return done.returncode, done.stdout + done.stderr


def _newest_run(s: Stack) -> dict:
    script = (f"import pathlib; runs = pathlib.Path({RUNS!r}).glob('*/run.json'); "
              f"print(sorted(runs, key=lambda p: p.stat().st_mtime)[-1].read_text())")
    return json.loads(s.compose("exec", "-T", "airflow-scheduler", "python", "-c", script).stdout)


def _explain(run: dict) -> str:
    """What a run that went the wrong way decided and why, for the log (the run's record is gone with the stack):
    the verdict's reason, each failed metric's, and each roll's registration and restart proof."""
    verdict = run.get("verdict") or {}
    lines = [f"verdict {verdict.get('verdict')}: {verdict.get('reason')}"]
    lines += [f"  {m['name']}: {m['reason']}" for m in verdict.get("metrics", []) if m.get("decision") == "FAIL"]
    for name, step in run.get("steps", {}).items():
        lines += [f"  {name}: {step.get('status')} " + ", ".join(
            f"broker {r['broker']} {r.get('phase')} registered {r.get('registered_s')} s"
            f"{' started ' + r['process_started'] if r.get('process_started') else ''}" for r in rolls(step))]
    return "\n".join(lines)


def _lost(run: dict) -> list[int]:
    """Every count of acknowledged probe messages lost the run recorded: the window's per lane and each roll's."""
    window = [lane["lost"] for lane in (run["verdict"].get("probe") or {}).values()]
    rolled = [step["result"]["probe"]["lost"] for step in run["steps"].values()
              if isinstance(step.get("result"), dict) and isinstance(step["result"].get("probe"), dict)
              and "lost" in step["result"]["probe"]]
    return window + rolled


def _brokers(s: Stack, client) -> dict[int, dict[str, str]]:
    """Broker id -> the config its container's environment gives it."""
    containers = s.containers(client)
    return {b: env.config_of(env.parse(containers[f"broker-{b}"].attrs["Config"]["Env"])) for b in (1, 2, 3)}


# The suite's 900 s covers the stack's setup too: images built cold (512 s in one fresh clone) left the two releases,
# each bounded at 20 minutes below, less than 400 s between them.
@pytest.mark.timeout(3600)
def test_the_compose_stack_rolls_its_own_brokers(stack, docker_client):
    _airflow_ready(stack)
    health = requests.get(f"http://{LOCAL}:{stack.ports.api}/api/v2/monitor/health", timeout=30).json()
    assert health["metadatabase"]["status"] == "healthy", health
    # The stack's Prometheus loaded the probe's recording and alerting rules (plugins/kafka_canary_provider/prometheus).
    rules = requests.get(f"http://{LOCAL}:{stack.ports.prometheus}/api/v1/rules", timeout=30).json()
    loaded = {g["name"]: len(g["rules"]) for g in rules["data"]["groups"]}
    assert loaded == {"kafka-canary-probe.recording": 4, "kafka-canary-probe.alerts": 5}, loaded
    before = _brokers(stack, docker_client)
    assert not any(config.keys() & {*GOOD_CONFIG, *BAD_CONFIG} for config in before.values())

    # A good change: promoted to every broker, verified.
    code, out = _release(stack, GOOD_CONFIG)
    run = _newest_run(stack)
    print(timeline(run), flush=True)
    if code != 0:
        print(out[-4000:], _explain(run), sep="\n", flush=True)
    assert code == 0, _explain(run)
    assert run["verdict"]["verdict"] == "PROMOTE", run["verdict"]
    assert run["status"] == "verified promoted", run["status"]
    assert run["spec"]["cluster"]["deployer"] == "docker"
    steps = run["steps"]
    assert [steps[s]["result"]["probe"]["lost"] for s in ("deploy-canary", "promote")] == [0, 0]
    assert set(_lost(run)) == {0}, _lost(run)
    assert all(config.items() >= GOOD_CONFIG.items() for config in _brokers(stack, docker_client).values())

    # A bad change (the probe's messages no longer fit): rolled back on the canary, verified, the rest untouched.
    promoted = _brokers(stack, docker_client)
    code, out = _release(stack, BAD_CONFIG)
    run = _newest_run(stack)
    print(timeline(run), flush=True)
    if code != 1:
        print(out[-4000:], _explain(run), sep="\n", flush=True)
    assert code == 1, _explain(run)
    assert run["verdict"]["verdict"] == "ROLLBACK", run["verdict"]
    assert run["status"] == "verified rolled_back", run["status"]
    assert "promote" not in run["steps"]
    assert _lost(run) and set(_lost(run)) == {0}, _lost(run)
    assert _brokers(stack, docker_client) == promoted
