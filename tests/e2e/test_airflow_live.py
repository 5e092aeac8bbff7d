"""The whole local Airflow (`kafka-canary ui`'s stack: `airflow standalone` — API server, scheduler, DAG processor,
triggerer; LocalExecutor on SQLite) on loopback, up and healthy with the project's DAG, seen the way its users see
it before a rollout:

- the release hook (`kafka-canary release`) against the real API server: wrong credentials, an unknown cluster and
  refused trigger-form params are clear errors and start nothing; the cluster is untouched;
- the plugin's "Canary rollouts" view is listed, and its pages are private without Airflow's login.

A rollout driven through a live Airflow — the release hook, a person answering an INCONCLUSIVE verdict, the report
in a browser — is `make test-distributed`'s (tests/distributed, run by CI after `make test`), on Celery workers.
"""

from __future__ import annotations

import shutil

import pytest
import requests
from live_airflow import DAG, api, release

from canary.airflow_stack import AirflowStack

pytestmark = [pytest.mark.integration, pytest.mark.e2e, pytest.mark.parallel]


def _cluster_state(cluster) -> dict:
    cluster.reload()
    return {n.node_id: (n.version, dict(n.config), n.rack) for n in cluster.state.nodes}


def test_the_release_hook_refuses_bad_input_on_a_live_airflow_and_starts_nothing(cluster_factory, tmp_path):
    cluster = cluster_factory(brokers=3)
    before = _cluster_state(cluster)
    stack = AirflowStack.start(tmp_path / "airflow", tmp_path / "rollouts", cluster.directory)
    try:
        stack.wait_ready(timeout=600)

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

        # The plugin's view in the UI's navigation; its pages need Airflow's login.
        plugins = api(stack, "GET", "/api/v2/plugins").json()["plugins"]
        views = [v for p in plugins if p["name"] == "kafka_canary" for v in p["external_views"]]
        assert views and views[0]["href"] == "/kafka-canary/"
        for page in ("/kafka-canary/", f"/kafka-canary/dag-runs/{DAG}/any_run"):
            assert requests.get(stack.url + page, timeout=30, allow_redirects=False).status_code in (401, 403), page
    finally:
        stack.stop()
        shutil.rmtree(tmp_path / "airflow" / "logs", ignore_errors=True)
