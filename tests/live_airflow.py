"""Helpers of the tests that drive a live Airflow: the release hook, the REST API with a token, headless Chromium."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import requests

from canary.airflow_stack import AirflowStack

KAFKA_CANARY = str(Path(sys.executable).parent / "kafka-canary")
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
