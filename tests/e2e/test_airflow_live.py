"""The whole Airflow on loopback (`airflow standalone`: API server, scheduler, DAG processor, triggerer; LocalExecutor
on SQLite) driving the broker rollout DAG on a real cluster, seen the way its users see it:

- the release hook (`kafka-canary release`) against the real API server: wrong credentials, an unknown cluster and
  refused trigger-form params are clear errors and start nothing;
- a rollout whose verdict is INCONCLUSIVE waits for a person (release exits 3); the person approves through the
  human-in-the-loop API; `release --follow` then exits 0 once the fleet is promoted and verified — real scheduler,
  real brokers; the judge inline (the Spark analysis in a live Airflow is the distributed test's, on a standalone
  Spark cluster, and the client DAG's);
- the report page, behind Airflow's login, opened in headless Chromium, shows the verdict and that the release
  pipeline started the run; the DAG run's "Canary report" tab leads to it.
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from pathlib import Path

import pytest
import requests
from live_airflow import api, check_report_in_browser, release

from canary.airflow_stack import AirflowStack
from canary.demo import FAST_JUDGE

pytestmark = [pytest.mark.integration, pytest.mark.e2e]
KAFKA_CANARY = str(Path(sys.executable).parent / "kafka-canary")
DAG = "kafka_broker_canary"
CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
# The probe's latencies not judged, nor the brokers' metrics (a busy machine's swings must not decide here): the
# probe's other metrics say PROMOTE, but capacity (required) was not judged, so the verdict is INCONCLUSIVE and a
# person decides. (A window too short to decide is refused up front now.)
UNDECIDABLE = FAST_JUDGE | {"metrics": {m: {"enabled": False} for m in (
    "e2e_latency_p50", "e2e_latency_p95", "e2e_latency_p99", "produce_latency_p99")}}


def _answer(stack: AirflowStack, run_id: str, option: str) -> None:
    """Answers the rollout's question as a person in the UI would: should Airflow lose the answer to its race (the
    task then fails and its retry asks again), the person sees the question again and answers it again."""
    task = f"/api/v2/dags/{DAG}/dagRuns/{run_id}/taskInstances/ask_a_person"
    answered = set()
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        ti = api(stack, "GET", task).json()
        if ti["state"] == "awaiting_input" and ti["try_number"] not in answered:
            answer = api(stack, "PATCH", f"{task}/-1/hitlDetails", json={"chosen_options": [option]})
            assert answer.status_code == 200, answer.text
            answered.add(ti["try_number"])
        elif ti["state"] in ("success", "failed", "skipped"):
            assert answered, f"ask_a_person ended {ti['state']} before it was answered"
            return
        time.sleep(2)
    raise AssertionError(f"ask_a_person did not finish within 300 s of the answers to tries {sorted(answered)}")


def _cluster_state(cluster) -> dict:
    cluster.reload()
    return {n.node_id: (n.version, dict(n.config), n.rack) for n in cluster.state.nodes}


def _diagnosis(stack: AirflowStack, run_id: str, runs: Path) -> str:
    """What a failed run left: each step's status and error from run.json, and the last log lines of the person's
    and the promote task."""
    lines = []
    state = runs / run_id / "run.json"
    if state.exists():
        data = json.loads(state.read_text())
        lines += [f"run status {data.get('status')}"] + [
            f"{name}: {step.get('status')} x{step.get('attempts')} {str(step.get('error'))[:500]}"
            for name, step in data.get("steps", {}).items()]
    for task_id in ("ask_a_person", "promote"):
        for attempt in (1, 2, 3):
            log = api(stack, "GET", f"/api/v2/dags/{DAG}/dagRuns/{run_id}/taskInstances/{task_id}/logs/{attempt}",
                       params={"full_content": "true"}, headers={"Accept": "text/plain"})
            if log.status_code == 200:
                lines += [f"--- {task_id} try {attempt}", log.text[-3000:]]
    return "\n".join(lines)


def test_release_hook_person_in_the_loop_and_report_page_on_a_live_airflow(cluster_factory, tmp_path):
    cluster = cluster_factory(brokers=3)
    before = _cluster_state(cluster)
    stack = AirflowStack.start(tmp_path / "airflow", tmp_path / "rollouts", cluster.directory)
    try:
        stack.wait_ready(timeout=600)

        # Bad input through the real API: nothing is triggered, the cluster is untouched.
        change = ("--config", "num.io.threads=6")
        wrong = release(stack, "--cluster", "kafka_canary_default", *change, "--wait", password="wrong")
        assert wrong.returncode == 2 and "refused the login of user 'admin'" in wrong.stderr, wrong.stderr
        assert "wrong" not in wrong.stdout + wrong.stderr
        unknown = release(stack, "--cluster", "no_such_cluster", *change, "--wait")
        assert unknown.returncode == 2 and "no connection 'no_such_cluster'" in unknown.stderr, unknown.stderr
        # A param the DAG's form refuses: refused by the release command before Airflow is asked.
        refused = release(stack, "--cluster", "kafka_canary_default", *change, "--param", "canary_count=0")
        assert refused.returncode == 2 and "canary_count: Input should be greater than or equal to 1" in \
            refused.stderr, refused.stderr
        assert api(stack, "GET", f"/api/v2/dags/{DAG}/dagRuns").json()["total_entries"] == 0
        assert _cluster_state(cluster) == before

        # A real rollout that cannot decide: the DAG asks a person, release says so and exits 3.
        run_id = "release_live_1"
        params = {"judge_config": UNDECIDABLE, "on_inconclusive": "ask", "probe_rate": 50,
                  "preflight_probe": "3s", "interim_interval": "10s", "capacity": "required", "load_rate": 0,
                  "broker_metrics": {"enabled": False}}
        asked = release(stack, "--cluster", "kafka_canary_default", "--config", "num.io.threads=6",
                         "--window", "40s", "--engine", "inline", "--run-id", run_id, "--wait", "--poll", "2",
                         *[a for k, v in params.items() for a in ("--param", f"{k}={json.dumps(v)}")])
        assert asked.returncode == 3, asked.stdout[-3000:] + asked.stderr[-3000:]
        assert "a person must decide" in asked.stdout and "spark_analysis: skipped" in asked.stdout, asked.stdout
        judged = api(stack, "GET", f"/api/v2/dags/{DAG}/dagRuns/{run_id}/taskInstances/judge/xcomEntries/"
                                    "return_value", params={"deserialize": "true"}).json()["value"]
        judged = json.loads(judged) if isinstance(judged, str) else judged
        assert judged["verdict"] == "INCONCLUSIVE", judged

        # The person approves in the human-in-the-loop API (what the UI's Required actions page calls) — a few
        # seconds later, as a person would: an answer within a second of the task parking races the scheduler's
        # bookkeeping in Airflow 3.3 (the DAG retries the question if it loses).
        time.sleep(5)
        _answer(stack, run_id, "Promote")
        followed = release(stack, "--follow", run_id, "--poll", "2")
        assert followed.returncode == 0, followed.stdout[-2000:] + _diagnosis(stack, run_id, tmp_path / "rollouts")
        chosen = api(stack, "GET", f"/api/v2/dags/{DAG}/dagRuns/{run_id}/taskInstances/ask_a_person/xcomEntries/"
                                    "skipmixin_key", params={"deserialize": "true"}).json()["value"]
        assert "promote" in str(chosen) and "rollback" not in str(chosen)  # the person's branch, as Airflow kept it
        assert "PROMOTE" in followed.stdout and "  promote: success" in followed.stdout
        after = _cluster_state(cluster)
        assert all(config.get("num.io.threads") == "6" for node, (_, config, _) in after.items() if node < 3000)
        assert all(rack == before[node][2] for node, (_, _, rack) in after.items())  # canary marker gone

        # The report: private without Airflow's login, shown in a browser with it.
        report = f"/kafka-canary/runs/{run_id}/report.html"
        assert requests.get(stack.url + report, timeout=30).status_code in (401, 403)
        plugins = api(stack, "GET", "/api/v2/plugins").json()["plugins"]
        views = [v for p in plugins if p["name"] == "kafka_canary" for v in p["external_views"]]
        assert views and views[0]["href"] == "/kafka-canary/"
        # The DAG run's "Canary report" tab opens the run's report, which says the release pipeline started it.
        tab = api(stack, "GET", f"/kafka-canary/dag-runs/{DAG}/{run_id}", allow_redirects=False)
        assert (tab.status_code, tab.headers.get("location")) == (307, f"/kafka-canary/runs/{run_id}/report.html")
        check_report_in_browser(stack, run_id, "INCONCLUSIVE", "promoted",
                                f"Started by the release pipeline, by {stack.username}")
    finally:
        stack.stop()
        shutil.rmtree(tmp_path / "airflow" / "logs", ignore_errors=True)
