"""Helpers of the tests that drive a live Airflow: the release hook, the REST API with a token, headless Chromium."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import requests

from canary.airflow_stack import AirflowStack

KAFKA_CANARY = str(Path(sys.executable).parent / "kafka-canary")
DAG = "kafka_broker_canary"
CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"


def release(stack: AirflowStack, *args: str, password: str | None = None, timeout: float = 900):
    env = dict(os.environ, AIRFLOW_URL=stack.url, AIRFLOW_USERNAME=stack.username,
               AIRFLOW_PASSWORD=password or stack.password)
    env.pop("AIRFLOW_API_TOKEN", None)
    return subprocess.run([KAFKA_CANARY, "release", *args], env=env, capture_output=True, text=True,
                          timeout=timeout)


def api(stack: AirflowStack, method: str, path: str, headers: dict | None = None, **kwargs) -> requests.Response:
    return requests.request(method, stack.url + path, timeout=30,
                            headers={"Authorization": f"Bearer {stack.token()}", **(headers or {})}, **kwargs)


def browser_session(scripts: bool = True):
    """Headless Debian Chromium through ChromeDriver; `scripts=False`: with JavaScript disabled."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    assert Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists(), \
        "Chromium and ChromeDriver are missing: `make test` installs them (apt-get install chromium chromium-driver)"
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1280,900"):
        options.add_argument(arg)
    if not scripts:
        options.add_experimental_option("prefs", {"profile.managed_default_content_settings.javascript": 2})
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)


def log_in(browser, stack: AirflowStack) -> None:
    """Airflow's own login page, which sets the session cookie the plugin's pages accept."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(f"{stack.url}/auth/login/")
    wait = WebDriverWait(browser, 60)
    wait.until(ec.presence_of_element_located((By.NAME, "username"))).send_keys(stack.username)
    browser.find_element(By.NAME, "password").send_keys(stack.password)
    browser.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait.until(lambda b: any(c["name"] == "_token" for c in b.get_cookies()))


def check_report_in_browser(stack: AirflowStack, run_id: str, *shown: str) -> None:
    """The run's report, reached from the plugin's list of rollouts after Airflow's login, shows `shown` and ends
    verified."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    browser = browser_session()
    try:
        log_in(browser, stack)
        wait = WebDriverWait(browser, 60)
        # From the plugin's list of rollouts (the UI's "Canary rollouts" entry) to the run's report.
        browser.get(f"{stack.url}/kafka-canary/")
        wait.until(ec.element_to_be_clickable((By.LINK_TEXT, run_id))).click()
        wait.until(ec.title_contains("Rollout"))
        text = browser.find_element(By.TAG_NAME, "body").text
        assert all(s in text for s in shown), text[:2000]
        started = time.monotonic()
        while "verified" not in text and time.monotonic() - started < 30:  # the report task may still be writing
            time.sleep(2)
            browser.refresh()
            text = browser.find_element(By.TAG_NAME, "body").text
        assert "verified" in text, text[:2000]
    finally:
        browser.quit()


def answer(stack: AirflowStack, run_id: str, option: str) -> None:
    """Answers the rollout's question as a person in the UI would: should Airflow lose the answer to its race (the
    task then fails and its retry asks again), the person sees the question again and answers it again."""
    task = f"/api/v2/dags/{DAG}/dagRuns/{run_id}/taskInstances/ask_a_person"
    answered = set()
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        ti = api(stack, "GET", task).json()
        if ti["state"] == "awaiting_input" and ti["try_number"] not in answered:
            answered_now = api(stack, "PATCH", f"{task}/-1/hitlDetails", json={"chosen_options": [option]})
            assert answered_now.status_code == 200, answered_now.text
            answered.add(ti["try_number"])
        elif ti["state"] in ("success", "failed", "skipped"):
            assert answered, f"ask_a_person ended {ti['state']} before it was answered"
            return
        time.sleep(2)
    raise AssertionError(f"ask_a_person did not finish within 300 s of the answers to tries {sorted(answered)}")


def task_logs(stack: AirflowStack, run_id: str, *task_ids: str) -> str:
    """The last lines of each try's log of `task_ids`, for a failure's message."""
    lines = []
    for task_id in task_ids:
        for attempt in (1, 2, 3):
            log = api(stack, "GET", f"/api/v2/dags/{DAG}/dagRuns/{run_id}/taskInstances/{task_id}/logs/{attempt}",
                      params={"full_content": "true"}, headers={"Accept": "text/plain"})
            if log.status_code == 200:
                lines += [f"--- {task_id} try {attempt}", log.text[-3000:]]
    return "\n".join(lines)


def rolls(step: dict) -> list[dict]:
    """The broker rolls a step's result records (run.json): its brokers rolled and its control brokers restarted."""
    result = step.get("result") if isinstance(step.get("result"), dict) else {}
    return [r for key in ("rolled", "controls_restarted") for r in (result.get(key) or [])
            if isinstance(r, dict) and "broker" in r]


def timeline(run: dict) -> str:
    """Each step's time and each roll's time to register (run.json), for the log: where a release spends its time."""
    parts = []
    for name, step in run.get("steps", {}).items():
        took = ((step.get("finished_ms") or 0) - (step.get("started_ms") or 0)) / 1000
        rolled = [f"{r['broker']}:{r.get('registered_s')}" for r in rolls(step)]
        parts.append(f"{name} {took:.0f} s" + (f" (registered s: {', '.join(rolled)})" if rolled else ""))
    return "steps: " + "; ".join(parts)


def task_instances(stack: AirflowStack, run_id: str) -> dict[str, dict]:
    """The DAG run's task instances (each one's latest try), by task id."""
    listed = api(stack, "GET", f"/api/v2/dags/{DAG}/dagRuns/{run_id}/taskInstances",
                 params={"limit": 100}).json()["task_instances"]
    return {ti["task_id"]: ti for ti in listed}


def xcom(stack: AirflowStack, run_id: str, task_id: str, key: str = "return_value"):
    """A task's XCom value as Airflow keeps it (JSON text decoded)."""
    value = api(stack, "GET", f"/api/v2/dags/{DAG}/dagRuns/{run_id}/taskInstances/{task_id}/xcomEntries/{key}",
                params={"deserialize": "true"}).json()["value"]
    return json.loads(value) if isinstance(value, str) else value


def task_timeline(stack: AirflowStack, run_id: str) -> str:
    """Each task instance's start and end, in seconds from the DAG run's start, for the log: where a DAG run spends
    its time between the steps (scheduling, queueing, retries) as well as in them."""
    began = api(stack, "GET", f"/api/v2/dags/{DAG}/dagRuns/{run_id}").json().get("start_date")
    if not began:
        return "tasks: the run has not started"

    def since(stamp: str | None) -> str:
        return f"{(datetime.fromisoformat(stamp) - datetime.fromisoformat(began)).total_seconds():.0f}" if stamp else ""

    started = sorted((ti for ti in task_instances(stack, run_id).values() if ti.get("start_date")),
                     key=lambda ti: ti["start_date"])
    return "tasks, s from the run's start: " + "; ".join(
        f"{ti['task_id']} {since(ti['start_date'])}-{since(ti.get('end_date'))} ({ti['state']}, try "
        f"{ti.get('try_number')})" for ti in started)
