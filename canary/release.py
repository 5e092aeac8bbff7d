"""`kafka-canary release`: the release-pipeline hook. Triggers the broker rollout DAG through Airflow's REST API
(v2, token auth), streams step progress, and exits with the rollout's outcome (canary.outcome), as the run's report
task read it from the run's record:

    0  promoted and verified          1  rolled back and verified
    3  a person must decide (the DAG waits for an approval in the Airflow UI)
    4  the run ended unfinished: a task failed (the lock, the cluster, the storage, a step), not a verdict
    2  error: Airflow unreachable or refused, nothing triggered, or --timeout passed (the run goes on)

Credentials: $AIRFLOW_API_TOKEN, or $AIRFLOW_USERNAME and $AIRFLOW_PASSWORD (exchanged at POST /auth/token).
They are sent only in the Authorization header and never printed.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
import time
import uuid
from typing import TextIO

import requests

from canary.errors import CanaryError
from canary.fields import parse_duration
from canary.forms import BROKER_FORM
from canary.kafka.secrets import refuse_credentials
from canary.outcome import Outcome

DAG_ID = "kafka_broker_canary"
APPROVAL_TASK = "ask_a_person"
REPORT_TASK = "report"  # its XCom is the run's summary, with the outcome (also when the run did not finish)
# Task states in which a human-in-the-loop task waits for a person.
WAITING_FOR_PERSON = ("deferred", "awaiting_input", "up_for_reschedule")
# Seconds between progress polls: often enough to show progress, never a flood of requests on Airflow.
MIN_POLL, MAX_POLL = 0.5, 600.0


RELEASE_NOTE = "Started by kafka-canary release"

class ReleaseError(CanaryError):
    """Airflow could not be used as asked; the message says what to fix. `transient`: Airflow did not answer
    in time or answered 5xx — worth asking again while following a run."""

    def __init__(self, message: str, transient: bool = False):
        super().__init__(message)
        self.transient = transient


class AirflowClient:
    """The few Airflow 3 REST API calls the release hook needs, each with a timeout."""

    def __init__(self, url: str, token: str | None = None, username: str | None = None,
                 password: str | None = None, timeout: float = 30.0):
        refuse_credentials(url, "set AIRFLOW_API_TOKEN, or AIRFLOW_USERNAME and AIRFLOW_PASSWORD",
                           where="the Airflow URL (--airflow-url, $AIRFLOW_URL)")
        if not re.match(r"^https?://[^\s/]+", url):
            raise ReleaseError("the Airflow URL (--airflow-url, $AIRFLOW_URL) must be http(s)://host[:port] of "
                               "Airflow's API server")
        self.url = url.rstrip("/")
        self.timeout = timeout
        self.session = requests.Session()
        self._username, self._password = username, password
        if token:
            self.session.headers["Authorization"] = f"Bearer {token}"
        elif not (username and password):
            raise ReleaseError("no Airflow credentials: set AIRFLOW_API_TOKEN, or AIRFLOW_USERNAME and "
                               "AIRFLOW_PASSWORD")

    def _call(self, method: str, path: str, **kwargs) -> dict:
        if "Authorization" not in self.session.headers:
            self._login()
        try:
            response = self.session.request(method, self.url + path, timeout=self.timeout, **kwargs)
        except requests.RequestException as exc:
            raise ReleaseError(f"cannot reach Airflow at {self.url}: {type(exc).__name__}", transient=True) from exc
        if response.status_code in (401, 403):
            raise ReleaseError(f"Airflow refused the credentials ({response.status_code}) for {method} {path}; "
                               f"check AIRFLOW_API_TOKEN or AIRFLOW_USERNAME/AIRFLOW_PASSWORD")
        if response.status_code == 404:
            return {}
        if response.status_code in (400, 422) and method == "POST":
            raise ReleaseError(f"Airflow refused the request {method} {path}: {_detail(response)}")
        if response.status_code >= 400:
            raise ReleaseError(f"Airflow answered {response.status_code} to {method} {path}: "
                               f"{_printable(response.text[:300])}", transient=response.status_code >= 500)
        return self._object(response, f"{method} {path}")

    def _object(self, response: requests.Response, request: str) -> dict:
        """The answer's JSON object; an answer of another kind (an HTML page, an array) is a ReleaseError."""
        try:
            body = response.json()
        except ValueError:
            body = None
        if not isinstance(body, dict):
            kind = "a JSON " + type(body).__name__ if body is not None else (
                response.headers.get("Content-Type") or "not JSON").split(";")[0]
            raise ReleaseError(f"{self.url} answered {request} with {kind}, not the JSON object of Airflow's REST "
                               f"API; check that --airflow-url is Airflow's API server")
        return body

    def _login(self) -> None:
        try:
            response = self.session.post(f"{self.url}/auth/token", timeout=self.timeout,
                                         json={"username": self._username, "password": self._password})
        except requests.RequestException as exc:
            raise ReleaseError(f"cannot reach Airflow at {self.url}: {type(exc).__name__}") from exc
        if response.status_code not in (200, 201):
            raise ReleaseError(f"Airflow refused the login of user {self._username!r} ({response.status_code})")
        token = self._object(response, "POST /auth/token").get("access_token")
        if not isinstance(token, str):
            raise ReleaseError(f"Airflow's answer to the login of user {self._username!r} holds no access_token")
        self.session.headers["Authorization"] = f"Bearer {token}"

    def has_connection(self, conn_id: str) -> bool | None:
        """Whether Airflow has the connection; None when this user may not read connections (not checked)."""
        try:
            return bool(self._call("GET", f"/api/v2/connections/{conn_id}"))
        except ReleaseError as exc:
            if "(403)" in str(exc):
                return None
            raise

    def dag(self, dag_id: str) -> dict:
        """The DAG's details ({} when Airflow has no such DAG)."""
        return self._call("GET", f"/api/v2/dags/{dag_id}")

    def trigger(self, dag_id: str, run_id: str, conf: dict) -> dict:
        # The note tells the run's pages that the release pipeline started it (Airflow records only "manual").
        return self._call("POST", f"/api/v2/dags/{dag_id}/dagRuns",
                          json={"dag_run_id": run_id, "logical_date": None, "conf": conf, "note": RELEASE_NOTE})

    def dag_run(self, dag_id: str, run_id: str) -> dict:
        return self._call("GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}")

    def task_states(self, dag_id: str, run_id: str) -> dict[str, str | None]:
        body = self._call("GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances", params={"limit": 100})
        return {t["task_id"]: t.get("state") for t in body.get("task_instances", [])}

    def xcom(self, dag_id: str, run_id: str, task_id: str, key: str = "return_value"):
        body = self._call("GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/xcomEntries/{key}",
                          params={"deserialize": "true"})
        value = body.get("value")
        if isinstance(value, str):
            try:
                return json.loads(value)
            except ValueError:
                return value
        return value


# What each outcome of a finished DAG run means for the release.
MEANING = {Outcome.PROMOTE: "the change reached the whole fleet and was verified",
           Outcome.ROLLBACK: "the canary was rolled back and the cluster verified equal to before",
           Outcome.INCONCLUSIVE: "a person must decide in the Airflow UI"}


def outcome(client: AirflowClient, dag_id: str, run_id: str, run_state: str) -> tuple[Outcome, str]:
    """The outcome of a finished DAG run and a line saying why: what its report task read from the run's record
    (RunStatus.outcome), UNFINISHED when the report says nothing."""
    summary = client.xcom(dag_id, run_id, REPORT_TASK)
    said = str(summary.get("outcome")) if isinstance(summary, dict) else ""
    found = Outcome(said) if said in Outcome.__members__ else Outcome.UNFINISHED
    if found in MEANING:
        return found, f"{found}: {MEANING[found]}"
    status = f" at '{_printable(str(summary.get('status')))}'" if isinstance(summary, dict) else ""
    return Outcome.UNFINISHED, (f"UNFINISHED: the rollout run ended {run_state} without a verified outcome{status}; "
                                f"see the run in Airflow")


def _detail(response: requests.Response) -> str:
    """The reason in an error answer: FastAPI's `detail` (a string or a list of validation errors)."""
    try:
        body = response.json()
    except ValueError:
        return _printable(response.text[:300])
    detail = body.get("detail", response.text) if isinstance(body, dict) else body
    if isinstance(detail, list):
        return _printable("; ".join(f"{'.'.join(str(x) for x in d.get('loc', []))}: {d.get('msg')}"
                                    if isinstance(d, dict) else str(d) for d in detail)[:600])
    return _printable(str(detail)[:600])


def release(client: AirflowClient, conf: dict, *, dag_id: str = DAG_ID, run_id: str | None = None,
            wait: bool = True, poll: float = 5.0, timeout: float = 4 * 3600, check_cluster: bool = True,
            patience: int = 10, out: TextIO = sys.stdout) -> int:
    run_id = run_id or f"release__{time.strftime('%Y%m%dT%H%M%S')}_{uuid.uuid4().hex[:6]}"
    cluster = conf.get("cluster_conn_id")
    if check_cluster and cluster and client.has_connection(cluster) is False:
        raise ReleaseError(f"Airflow has no connection {cluster!r}: register the cluster as an Airflow connection "
                           f"of type kafka_canary, or pass the right --cluster (a connection kept only in the "
                           f"workers' environment or a secrets backend is invisible to the API: add "
                           f"--skip-cluster-check); nothing was triggered")
    missing = f"Airflow has no DAG {dag_id}; is the kafka-canary dags folder deployed?"
    dag = client.dag(dag_id)
    if not dag:
        raise ReleaseError(missing)
    if dag.get("is_paused"):
        # a run of a paused DAG waits in the queue without a word: say so before anything is triggered
        raise ReleaseError(f"the DAG {dag_id} is paused in Airflow (new DAGs may start paused): unpause it (the "
                           f"toggle in the UI, or `airflow dags unpause {dag_id}`); nothing was triggered")
    if not client.trigger(dag_id, run_id, conf):  # removed in between
        raise ReleaseError(missing)
    print(f"triggered {dag_id} run {run_id}", file=out, flush=True)
    if not wait:
        return 0
    return follow(client, run_id, dag_id=dag_id, poll=poll, timeout=timeout, patience=patience, out=out)


def follow(client: AirflowClient, run_id: str, *, dag_id: str = DAG_ID, poll: float = 5.0,
           timeout: float = 4 * 3600, patience: int = 10, out: TextIO = sys.stdout) -> int:
    """Streams a DAG run's task states until it ends (or waits for a person); returns the exit code. Up to
    `patience` polls in a row may fail transiently (a busy API server, a restart): the run goes on in Airflow
    meanwhile, and a deployment step should not fail on a hiccup of the thing watching it."""
    if not client.dag_run(dag_id, run_id):
        raise ReleaseError(f"Airflow has no run {run_id!r} of DAG {dag_id}")
    deadline = time.monotonic() + timeout
    seen: dict[str, str | None] = {}
    failures = 0
    while time.monotonic() < deadline:
        try:
            code = _poll(client, dag_id, run_id, seen, out)
        except ReleaseError as exc:
            failures += 1
            if not exc.transient or failures > patience:
                raise
            print(f"  (Airflow did not answer: {exc}; asking again, {failures}/{patience})", file=out, flush=True)
        else:
            failures = 0
            if code is not None:
                return code
        time.sleep(poll)
    print(f"error: run {run_id} did not finish within {timeout:.0f}s; it goes on in Airflow", file=out, flush=True)
    return Outcome.ERROR.exit_code


def _poll(client: AirflowClient, dag_id: str, run_id: str, seen: dict[str, str | None], out: TextIO) -> int | None:
    """One look at the run: prints changed task states (updating `seen`); the exit code once there is one."""
    states = client.task_states(dag_id, run_id)
    for task, state in states.items():
        if state != seen.get(task) and state is not None:
            print(f"  {_printable(str(task))}: {_printable(str(state))}", file=out, flush=True)
    seen.clear()
    seen.update(states)
    if states.get(APPROVAL_TASK) in WAITING_FOR_PERSON:
        print(f"INCONCLUSIVE: a person must decide in the Airflow UI ({client.url}, DAG {dag_id}, run {run_id}, "
              f"task {APPROVAL_TASK})", file=out, flush=True)
        return Outcome.INCONCLUSIVE.exit_code
    run_state = client.dag_run(dag_id, run_id).get("state")
    if run_state in ("success", "failed"):
        ended, why = outcome(client, dag_id, run_id, run_state)
        print(why, file=out, flush=True)
        return ended.exit_code
    return None


def _conf(args: argparse.Namespace) -> dict:
    conf: dict = {}
    for item in args.param or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ReleaseError(f"--param {item!r} is not KEY=VALUE")
        # JSON where it parses ({"warmup_s": 5}, 20, true), else the plain string; a text param stays text
        conf[key] = BROKER_FORM.parse(key, value) if key in BROKER_FORM.names else value
    conf["cluster_conn_id"] = args.cluster
    conf["started_by"] = "release"  # what the run's report and the runs index say started it
    if args.version is not None or "target_version" not in conf:
        conf["target_version"] = args.version  # none: a config-only change
    for flag, key in (("canary_count", "canary_count"), ("window", "window"), ("engine", "engine")):
        value = getattr(args, flag)
        if value is not None:
            conf[key] = value
    overrides = {}
    for item in args.config or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ReleaseError(f"--config {item!r} is not KEY=VALUE")
        overrides[key] = value
    if overrides:
        conf["config_overrides"] = overrides
    BROKER_FORM.check(conf)  # the DAG's own rules, before Airflow is asked for anything
    return conf


def poll_seconds(text: str) -> float:
    """--poll: a number of seconds from MIN_POLL to MAX_POLL (an argparse type: a bad value is a usage error)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid float value: {text!r}") from None
    if not (math.isfinite(value) and MIN_POLL <= value <= MAX_POLL):
        raise argparse.ArgumentTypeError(f"{text!r} must be seconds from {MIN_POLL:g} to {MAX_POLL:g}")
    return value


def _printable(text: str) -> str:
    """`text` without control characters (an answer's escape sequences never reach the terminal)."""
    return "".join(c if c.isprintable() else " " for c in text)


def cmd_release(args: argparse.Namespace) -> int:
    if args.version is not None and not re.fullmatch(r"\d+\.\d+\.\d+", args.version):
        raise ReleaseError(f"--version {args.version!r} is not a Kafka release such as 4.1.2")
    try:
        timeout = parse_duration(args.timeout)
    except CanaryError as exc:
        raise ReleaseError(f"--timeout: {exc}") from None
    if timeout is None:  # an empty --timeout: the deadline arithmetic needs a number
        raise ReleaseError("--timeout: give a duration such as 4h or 30m")
    if not args.follow and not args.cluster:
        raise ReleaseError("--cluster is required (the Airflow connection id of the cluster), unless --follow")
    conf = None if args.follow else _conf(args)  # every param checked before Airflow is asked anything
    client = AirflowClient(args.airflow_url, token=os.environ.get("AIRFLOW_API_TOKEN"),
                           username=os.environ.get("AIRFLOW_USERNAME"), password=os.environ.get("AIRFLOW_PASSWORD"))
    if conf is None:
        return follow(client, args.follow, poll=args.poll, timeout=timeout, patience=args.patience)
    return release(client, conf, run_id=args.run_id, wait=args.wait, poll=args.poll, timeout=timeout,
                   check_cluster=not args.skip_cluster_check, patience=args.patience)


def register(sub) -> None:
    p = sub.add_parser("release", help="trigger the broker rollout DAG in Airflow (release pipelines); exit 0 "
                                       "promoted, 1 rolled back, 3 a person decides, 4 the run ended unfinished, "
                                       "2 error",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cluster", help="the Airflow connection id of the cluster (required unless --follow)")
    p.add_argument("--version", help="target Kafka version, e.g. 4.1.2")
    p.add_argument("--config", action="append", metavar="KEY=VALUE", help="broker config override (repeatable)")
    p.add_argument("--canary-count", type=int, help="canary brokers (default: the DAG's)")
    p.add_argument("--window", help="probe window, e.g. 2m (default: the DAG's)")
    p.add_argument("--engine", choices=("spark", "inline"), help="analysis engine (default: the DAG's)")
    p.add_argument("--param", action="append", metavar="KEY=VALUE",
                   help="any other trigger-form field, VALUE as JSON where it parses "
                        "(e.g. judge_config='{\"warmup_s\": 5}', probe_rate=50; repeatable)")
    p.add_argument("--skip-cluster-check", action="store_true",
                   help="do not ask Airflow's API whether the --cluster connection exists first")
    p.add_argument("--run-id", help="the DAG run id (default: release__<time>_<random>)")
    p.add_argument("--follow", metavar="RUN_ID", help="follow an existing run (e.g. after a person decided) "
                                                      "instead of triggering one; exits with its outcome")
    p.add_argument("--wait", action="store_true", help="stream progress and exit with the outcome")
    p.add_argument("--timeout", default="4h", help="give up waiting after this long (default 4h)")
    p.add_argument("--poll", type=poll_seconds, default=5.0,
                   help=f"seconds between progress polls, {MIN_POLL:g} to {MAX_POLL:g} (default 5)")
    p.add_argument("--patience", type=int, default=10,
                   help="polls in a row Airflow may fail to answer (timeout, 5xx) before giving up (default 10)")
    p.add_argument("--airflow-url", default=os.environ.get("AIRFLOW_URL", "http://localhost:8080"),
                   help="Airflow's API server (default $AIRFLOW_URL or http://localhost:8080)")
    p.set_defaults(func=cmd_release)
