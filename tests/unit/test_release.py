"""The release hook against a small fake of Airflow's REST API (a unit test: the real API server is exercised
by the end-to-end tests)."""

import argparse
import io
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from canary.release import AirflowClient, ReleaseError, _conf, follow, release


class FakeAirflow:
    """Serves /auth/token and the dagRuns endpoints; `script` is the list of task-state snapshots to walk."""

    def __init__(self, script: list[dict], report: dict | None, final: str = "success", password: str = "s3cret",
                 busy: int = 0, paused: bool = False):
        self.script, self.report, self.final, self.password = script, report, final, password
        self.paused = paused
        self.busy = busy  # this many task-state polls answer 503 first
        self.calls: list[tuple[str, str, dict | None, str | None]] = []
        self.step = 0
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _send(self, code: int, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _body(self):
                length = int(self.headers.get("Content-Length") or 0)
                return json.loads(self.rfile.read(length)) if length else None

            def do_POST(self):
                body = self._body()
                fake.calls.append(("POST", self.path, body, self.headers.get("Authorization")))
                if self.path == "/auth/token":
                    if body.get("password") != fake.password:
                        return self._send(401, {"detail": "bad"})
                    return self._send(201, {"access_token": "tok"})
                if self.headers.get("Authorization") != "Bearer tok":
                    return self._send(401, {"detail": "no"})
                if self.path == "/api/v2/dags/kafka_broker_canary/dagRuns":
                    if not isinstance(body["conf"].get("canary_count", 1), int):
                        return self._send(400, {"detail": "Invalid input for param canary_count: 'x' is not of "
                                                          "type 'integer'"})
                    return self._send(200, {"dag_run_id": body["dag_run_id"], "state": "queued"})
                return self._send(404, {})

            def do_GET(self):
                fake.calls.append(("GET", self.path, None, self.headers.get("Authorization")))
                if self.headers.get("Authorization") != "Bearer tok":
                    return self._send(401, {"detail": "no"})
                if self.path.startswith("/api/v2/connections/"):
                    known = self.path.endswith("/prod")
                    return self._send(200, {"connection_id": "prod"}) if known else self._send(404, {})
                if self.path.endswith("/taskInstances?limit=100") and fake.busy > 0:
                    fake.busy -= 1
                    return self._send(503, {"detail": "busy"})
                if self.path.endswith("/taskInstances?limit=100"):
                    states = fake.script[min(fake.step, len(fake.script) - 1)]
                    fake.step += 1
                    return self._send(200, {"task_instances": [{"task_id": t, "state": s} for t, s in states.items()]})
                if "/xcomEntries/return_value" in self.path and "/report/" in self.path:
                    return self._send(200, {"value": fake.report}) if fake.report else self._send(404, {})
                if self.path == "/api/v2/dags/kafka_broker_canary":
                    return self._send(200, {"dag_id": "kafka_broker_canary", "is_paused": fake.paused})
                if self.path.startswith("/api/v2/dags/kafka_broker_canary/dagRuns/unknown"):
                    return self._send(404, {})
                if self.path.startswith("/api/v2/dags/kafka_broker_canary/dagRuns/"):
                    done = fake.step >= len(fake.script)
                    return self._send(200, {"state": fake.final if done else "running"})
                return self._send(404, {})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()


@pytest.fixture
def airflow():
    servers = []

    def make(*args, **kwargs) -> FakeAirflow:
        servers.append(FakeAirflow(*args, **kwargs))
        return servers[-1]
    yield make
    for s in servers:
        s.close()


# What the report task returns (canary.rollout.core.RunSummary), of which the release reads the outcome.
PROMOTED = {"outcome": "PROMOTE", "status": "verified promoted", "exit_code": 0}
ROLLED_BACK = {"outcome": "ROLLBACK", "status": "verified rolled_back", "exit_code": 1}
STEPS = [{"preflight": "running"}, {"preflight": "success", "deploy_canary": "running"},
         {"preflight": "success", "deploy_canary": "success", "verify": "success", "report": "success"}]


def run(fake: FakeAirflow, password="s3cret", **kwargs) -> tuple[int, str]:
    out = io.StringIO()
    client = AirflowClient(fake.url, username="ci", password=password, timeout=5)
    code = release(client, {"cluster_conn_id": "prod", "target_version": "4.1.2"}, run_id="r1", poll=0.01,
                   out=out, **kwargs)
    return code, out.getvalue()


def test_promoted_run_exits_0_and_streams_progress(airflow):
    fake = airflow(STEPS, PROMOTED)
    code, text = run(fake)
    assert code == 0 and "PROMOTE" in text
    assert "  preflight: running" in text and "  deploy_canary: success" in text
    trigger = next(c for c in fake.calls if c[0] == "POST" and "dagRuns" in c[1])
    assert trigger[2]["conf"] == {"cluster_conn_id": "prod", "target_version": "4.1.2"}
    assert trigger[2]["dag_run_id"] == "r1" and trigger[2]["logical_date"] is None
    assert all(c[3] == "Bearer tok" for c in fake.calls if c[1] != "/auth/token")
    assert "s3cret" not in text


def test_rolled_back_run_exits_1(airflow):
    code, text = run(airflow(STEPS, ROLLED_BACK))
    assert code == 1 and "ROLLBACK" in text


def test_task_states_reach_the_terminal_without_their_escape_sequences(airflow):
    """An Airflow (or a proxy) answering task ids and states with control characters cannot drive the terminal."""
    hostile = [{"preflight\x1b[2J": "running\x1b]0;owned\x07"}, *STEPS[1:]]
    code, text = run(airflow(hostile, PROMOTED))
    assert code == 0 and "\x1b" not in text and "\x07" not in text
    assert "  preflight [2J: running ]0;owned " in text


def test_waiting_for_a_person_exits_3(airflow):
    code, text = run(airflow([{"judge": "success", "ask_a_person": "deferred"}], None))
    assert code == 3 and "a person must decide" in text


def test_failed_run_without_outcome_exits_4(airflow):
    code, text = run(airflow(STEPS, None, final="failed"))
    assert code == 4 and "UNFINISHED: the rollout run ended failed without a verified outcome" in text


def test_a_run_its_report_says_is_unfinished_exits_4_naming_where_it_stopped(airflow):
    """The report task fails the DAG run when the rollout is not verified, and leaves the run's summary in XCom."""
    code, text = run(airflow(STEPS, {"outcome": "UNFINISHED", "status": "judged ROLLBACK", "exit_code": 4},
                             final="failed"))
    assert code == 4 and "without a verified outcome at 'judged ROLLBACK'" in text


def test_no_wait_returns_once_triggered(airflow):
    fake = airflow(STEPS, None)
    assert run(fake, wait=False) == (0, "triggered kafka_broker_canary run r1\n")
    assert not any("taskInstances" in c[1] for c in fake.calls)


def test_bad_credentials_and_unreachable_airflow_are_clear_errors(airflow):
    with pytest.raises(ReleaseError, match="refused the login of user 'ci'"):
        run(airflow(STEPS, None), password="wrong")
    with pytest.raises(ReleaseError, match="cannot reach Airflow"):
        release(AirflowClient("http://127.0.0.1:1", token="t", timeout=2), {}, run_id="r", out=io.StringIO())
    with pytest.raises(ReleaseError, match="no Airflow credentials"):
        AirflowClient("http://127.0.0.1:1")


def test_timeout_exits_2(airflow):
    code, text = run(airflow([{"preflight": "running"}] * 1000, None), timeout=0.05)
    assert code == 2 and "did not finish" in text


def test_unknown_cluster_is_refused_before_anything_is_triggered(airflow):
    fake = airflow(STEPS, None)
    client = AirflowClient(fake.url, username="ci", password="s3cret", timeout=5)
    with pytest.raises(ReleaseError, match="no connection 'nope'.*nothing was triggered"):
        release(client, {"cluster_conn_id": "nope"}, run_id="r1", out=io.StringIO())
    assert not any(c[0] == "POST" and "dagRuns" in c[1] for c in fake.calls)


def test_a_paused_dag_is_named_before_anything_is_triggered(airflow):
    fake = airflow(STEPS, None, paused=True)
    with pytest.raises(ReleaseError, match="kafka_broker_canary is paused.*dags unpause.*nothing was triggered"):
        run(fake)
    assert not any(c[0] == "POST" and "dagRuns" in c[1] for c in fake.calls)


def test_refused_params_and_unknown_runs_are_clear_errors(airflow):
    fake = airflow(STEPS, None)
    client = AirflowClient(fake.url, username="ci", password="s3cret", timeout=5)
    with pytest.raises(ReleaseError, match="refused the request.*canary_count.*not of type 'integer'"):
        release(client, {"cluster_conn_id": "prod", "canary_count": "x"}, run_id="r1", out=io.StringIO())
    with pytest.raises(ReleaseError, match="no run 'unknown'"):
        follow(client, "unknown", out=io.StringIO())


def test_follow_an_existing_run_exits_with_its_outcome(airflow):
    fake = airflow(STEPS, PROMOTED)
    out = io.StringIO()
    code = follow(AirflowClient(fake.url, username="ci", password="s3cret", timeout=5), "r1", poll=0.01, out=out)
    assert code == 0 and "PROMOTE" in out.getvalue()
    assert not any(c[0] == "POST" and "dagRuns" in c[1] for c in fake.calls)


def test_params_pass_through_as_json_where_they_parse():
    args = argparse.Namespace(cluster="prod", version=None, canary_count=None, window="40s", engine=None,
                              config=["num.io.threads=6"],
                              param=['judge_config={"warmup_s": 5}', "probe_rate=50", "on_inconclusive=ask"])
    assert _conf(args) == {"judge_config": {"warmup_s": 5}, "probe_rate": 50, "on_inconclusive": "ask",
                           "cluster_conn_id": "prod", "started_by": "release", "target_version": None, "window": "40s",
                           "config_overrides": {"num.io.threads": "6"}}
    with pytest.raises(ReleaseError, match="--param 'oops' is not KEY=VALUE"):
        _conf(argparse.Namespace(**{**vars(args), "param": ["oops"]}))


def test_a_busy_airflow_is_asked_again_while_following_and_given_up_on_after_patience(airflow):
    code, text = run(airflow(STEPS, PROMOTED, busy=3))
    assert code == 0 and text.count("asking again") == 3 and "PROMOTE" in text
    with pytest.raises(ReleaseError, match="answered 503"):
        follow(AirflowClient(airflow(STEPS, None, busy=50).url, username="ci", password="s3cret", timeout=5), "r1",
               poll=0.01, patience=2, out=io.StringIO())


def test_params_the_form_refuses_stop_the_release_before_airflow_is_asked(airflow, monkeypatch):
    from canary import release as release_module
    from canary.forms import FormError

    fake = airflow(STEPS, None)
    args = argparse.Namespace(cluster="prod", version=None, canary_count=None, window=None, engine=None,
                              config=["broker.rack=x"], param=["canary_count=0", "target_version=4.1", "windw=1m"])
    with pytest.raises(FormError, match="windw: unknown param"):
        _conf(args)
    args.param = ["canary_count=0", "target_version=4.1"]
    with pytest.raises(FormError) as refused:
        _conf(args)
    assert [p.split(":")[0] for p in refused.value.problems] == [
        "target_version", "config_overrides.broker.rack", "canary_count"]  # every problem, each naming its param
    # The whole command: exit 2 from the check, and no request reached Airflow.
    monkeypatch.setenv("AIRFLOW_API_TOKEN", "t")
    parser = argparse.ArgumentParser()
    release_module.register(parser.add_subparsers())
    parsed = parser.parse_args(["release", "--cluster", "prod", "--version", "4.1.2", "--airflow-url", fake.url,
                                "--param", "window=5s"])
    with pytest.raises(FormError, match="window: '5s' must be a duration between 10s and 24h"):
        parsed.func(parsed)
    assert fake.calls == []
