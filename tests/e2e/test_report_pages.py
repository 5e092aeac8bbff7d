"""The report pages as an on-call engineer opens them. On real brokers, from the command line into one runs root: a
health sweep, an upgrade that is promoted, a canary whose clients are slowed (rolled back) and a rollout whose
verdict is INCONCLUSIVE (stopped for a person). Then Airflow (`airflow standalone`, the plugin) and headless Chromium
behind Airflow's login: the runs index lists all four with what started them; each page shows its verdict, the
changed brokers marked and its plots loaded; the pages read the same with scripts disabled. Screenshots of each page
go to $KAFKA_CANARY_SCREENSHOTS (`make screenshots` writes docs/img), else to the test's directory.

make faults (minutes of rollouts); the page's parts are unit-tested (tests/unit/rollout/core/test_report.py,
tests/unit/plugins/test_plugin.py) and `make test`'s live Airflow opens one report in Chromium."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from live_airflow import KAFKA_CANARY, browser_session, log_in

from canary.airflow_stack import AirflowStack
from canary.cluster.distribution import TARGET_VERSION
from canary.demo import FAST_JUDGE

pytestmark = [pytest.mark.integration, pytest.mark.e2e, pytest.mark.slow]

# The probe alone judges (an idle test cluster); the INCONCLUSIVE run requires capacity it cannot judge.
PROBE_ONLY = {"probe": {"window": "45s", "interim_interval": "10s", "rate": 50, "preflight": "3s",
                        "calibration": "12s"},
              "judge": {"engine": "inline", "config": FAST_JUDGE}, "timeouts": {"guard": "60s", "warm_up": "120s"},
              "capacity": "not_required", "canary": {"count": 1, "control": "none"}}
UNDECIDABLE = FAST_JUDGE | {"metrics": {m: {"enabled": False} for m in (
    "e2e_latency_p50", "e2e_latency_p95", "e2e_latency_p99", "produce_latency_p99")}}
RUNS = {  # run id: (spec changes, exit code, verdict)
    "upgrade-promoted": ({"change": {"version": TARGET_VERSION}}, 0, "PROMOTE"),
    "slow-canary-rolled-back": ({"change": {"config": {"num.io.threads": "6"}}, "fault": {"client_delay_ms": 250}},
                                1, "ROLLBACK"),
    "undecided": ({"change": {"config": {"num.network.threads": "4"}}, "capacity": "required",
                   "judge": {"engine": "inline", "config": UNDECIDABLE}, "broker_metrics": {"enabled": False},
                   "load": {"rate": 0}}, 3, "INCONCLUSIVE"),
}


def _cli(*args: str, env: dict[str, str], timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run([KAFKA_CANARY, *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **env})


def _screenshot(browser, name: str, out: Path) -> None:
    """What a person sees first (`<name>.png`, 1280×900) and the whole page (`<name>-full.png`), as PNG with a
    palette (about a third of the bytes: they are kept in docs/img)."""
    from PIL import Image

    browser.save_screenshot(str(out / f"{name}.png"))
    height = browser.execute_script("return document.documentElement.scrollHeight")
    browser.set_window_size(1280, min(max(height, 600), 6000))
    browser.save_screenshot(str(out / f"{name}-full.png"))
    browser.set_window_size(1280, 900)
    for shot in (out / f"{name}.png", out / f"{name}-full.png"):
        Image.open(shot).convert("RGB").quantize(colors=128).save(shot, optimize=True)


def test_report_pages_in_a_browser(cluster_factory, tmp_path, monkeypatch):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    cluster = cluster_factory(brokers=3)
    runs, history = tmp_path / "rollouts", tmp_path / "history"
    env = {"KAFKA_CANARY_RUNS": str(runs), "KAFKA_CANARY_HISTORY": str(history)}
    monkeypatch.setenv("KAFKA_CANARY_HISTORY", str(history))  # the API server's, where it finds the sweeps' pages
    shots = Path(os.environ.get("KAFKA_CANARY_SCREENSHOTS") or tmp_path / "screenshots")
    shots.mkdir(parents=True, exist_ok=True)

    swept = _cli("sweep", "--bootstrap-servers", cluster.bootstrap_servers, "--cluster-name", "embedded",
                 "--duration", "10s", "--json", env=env, timeout=300)
    assert swept.returncode in (0, 3), swept.stderr[-3000:]
    sweep_id = json.loads(swept.stdout)["sweep_id"]
    for run_id, (changes, code, verdict) in RUNS.items():
        spec = {"cluster": {"dir": str(cluster.directory)}, "run_id": run_id} | PROBE_ONLY | changes
        (tmp_path / f"{run_id}.json").write_text(json.dumps(spec))
        done = _cli("rollout", "run", "--spec", str(tmp_path / f"{run_id}.json"), "--on-inconclusive", "stop",
                    "--json", env=env)
        assert done.returncode == code, done.stdout[-3000:] + done.stderr[-3000:]
        assert json.loads(done.stdout)["verdict"] == verdict

    stack = AirflowStack.start(tmp_path / "airflow", runs, cluster.directory)
    browser = None
    try:
        stack.wait_ready(timeout=600)
        browser = browser_session()
        log_in(browser, stack)
        wait = WebDriverWait(browser, 60)
        browser.get(f"{stack.url}/kafka-canary/")
        rows = wait.until(ec.presence_of_all_elements_located((By.CSS_SELECTOR, "table tr")))[1:]
        listed = {r.find_element(By.TAG_NAME, "th").text: r.text for r in rows}
        assert set(listed) == {*RUNS, f"sweep-embedded-{sweep_id}"}, listed
        assert all("the command line" in text for text in listed.values()), listed
        _screenshot(browser, "runs-index", shots)

        for run_id, (_, _, verdict) in RUNS.items():
            browser.get(f"{stack.url}/kafka-canary/")
            wait.until(ec.element_to_be_clickable((By.LINK_TEXT, run_id))).click()
            wait.until(ec.title_contains(run_id))
            banner = browser.find_element(By.CSS_SELECTOR, "p.verdict")
            assert banner.text.startswith(verdict) and verdict in banner.get_attribute("class"), banner.text
            changed = browser.find_elements(By.CSS_SELECTOR, "h2 + table .changed")  # What changed, marked
            assert changed, f"{run_id}: no changed cell"
            plots = browser.find_elements(By.CSS_SELECTOR, "figure img")
            assert plots and all(browser.execute_script("return arguments[0].naturalWidth", img) > 0 and
                                 img.get_attribute("alt") for img in plots), f"{run_id}: plots missing"
            text = browser.find_element(By.TAG_NAME, "body").text
            assert "Started by the command line" in text and "Timeline" in text and "Audit log" in text
            _screenshot(browser, f"report-{verdict.lower()}", shots)
        text = browser.find_element(By.TAG_NAME, "body").text
        assert "Not judged (no data)" in text  # the INCONCLUSIVE run names what it could not judge

        browser.get(f"{stack.url}/kafka-canary/sweeps/embedded/{sweep_id}/report.html")
        assert "Health sweep of embedded" in browser.find_element(By.TAG_NAME, "h1").text
        _screenshot(browser, "report-sweep", shots)
        browser.quit()

        # Without scripts: Airflow's session cookie set by hand (its login page is a script), the same pages read.
        browser = browser_session(scripts=False)
        browser.get(f"{stack.url}/kafka-canary/")
        browser.add_cookie({"name": "_token", "value": stack.token(), "path": "/"})
        browser.get(f"{stack.url}/kafka-canary/?verdict=ROLLBACK")
        assert [a.text for a in browser.find_elements(By.CSS_SELECTOR, "table th a")] == ["slow-canary-rolled-back"]
        browser.find_element(By.LINK_TEXT, "slow-canary-rolled-back").click()
        assert browser.find_element(By.CSS_SELECTOR, "p.verdict").text.startswith("ROLLBACK")
        assert browser.find_elements(By.CSS_SELECTOR, "figure img")
    finally:
        if browser is not None:
            browser.quit()
        stack.stop()
        shutil.rmtree(tmp_path / "airflow" / "logs", ignore_errors=True)
        # The undecided run holds the cluster: rolled back, as the person would, before the cluster stops.
        _cli("rollout", "rollback", "--spec", str(tmp_path / "undecided.json"), env=env)
