"""A plain (non-editable) install of the wheel into a fresh venv gives a working `kafka-canary`, run outside the
repository: the CLI, the analysis with both engines, and the package data the Spark engine submits.

The wheel is installed without dependencies; the third-party packages come from this interpreter's environment
through a .pth file. That .pth adds site-packages only as a path, so the editable install of canary there does not
load: the tests check canary comes from the fresh venv. (The provider's install, with its dependencies:
test_provider_install.py.)"""

from __future__ import annotations

import json
import subprocess
import sysconfig
from pathlib import Path

import pytest
from installing import clean_env, run, wheel_venv
from observation_files import probe_run, write_judge, write_lines

pytestmark = [pytest.mark.integration, pytest.mark.parallel]


@pytest.fixture(scope="module")
def venv(tmp_path_factory) -> Path:
    """A fresh venv with the wheel installed and this environment's third-party packages visible."""
    venv = wheel_venv(tmp_path_factory.mktemp("install"), "--no-deps", "--no-index")
    site = Path(run([venv / "bin" / "python", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"])
                .stdout.strip())
    ours = dict.fromkeys(sysconfig.get_paths()[key] for key in ("purelib", "platlib"))  # of sys.prefix
    (site / "third_party.pth").write_text("".join(f"{path}\n" for path in ours))
    return venv


@pytest.fixture
def run_in(venv, tmp_path):
    """Runs a command of the venv in a fresh directory outside the repository."""
    env = clean_env()

    def run_it(program: str, *args, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess:
        cmd = [venv / "bin" / program, *args]
        if check:
            return run(cmd, cwd=tmp_path, env=env, timeout=timeout)
        return subprocess.run([str(c) for c in cmd], cwd=tmp_path, env=env, timeout=timeout, capture_output=True,
                              text=True)
    return run_it


def test_canary_and_its_package_data_come_from_the_venv(venv, run_in):
    shown = json.loads(run_in("python", "-c", """if True:
        import importlib.util, json, canary
        from canary.analysis import connector, submit
        print(json.dumps({"canary": canary.__file__, "job": str(submit.JOB), "pom": str(connector.POM),
                          "files": submit.JOB.is_file() and connector.POM.is_file(),
                          "services": importlib.util.find_spec("canary.examples.services.producer").origin}))
    """).stdout)
    assert shown.pop("files") is True
    for name, path in shown.items():
        assert Path(path).is_relative_to(venv), (name, path)
    assert "from canary.analysis.job import main" in Path(shown["job"]).read_text()


def test_the_installed_cli_runs_the_inline_analysis(run_in, tmp_path):
    assert "analyze" in run_in("kafka-canary", "--help").stdout
    write_lines(tmp_path / "observations.jsonl", probe_run(lose_every=10))
    write_judge(tmp_path / "judge.yaml")
    done = run_in("kafka-canary", "analyze", "--engine", "inline", "--observations", "observations.jsonl",
                  "--out", "out", "--config", "judge.yaml", check=False)
    assert done.returncode == 1, done.stdout + done.stderr  # ROLLBACK
    assert done.stdout.startswith("ROLLBACK (score ")
    assert json.loads((tmp_path / "out" / "verdict.json").read_text())["verdict"] == "ROLLBACK"


def test_the_installed_cli_submits_the_packaged_spark_job(run_in, tmp_path):
    write_lines(tmp_path / "observations.jsonl", probe_run())
    write_judge(tmp_path / "judge.yaml")
    done = run_in("kafka-canary", "analyze", "--observations", "observations.jsonl", "--out", "out",
                  "--config", "judge.yaml", "--master", "local[1]", check=False, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]  # PROMOTE
    assert json.loads((tmp_path / "out" / "verdict.json").read_text())["verdict"] == "PROMOTE"
    assert (tmp_path / "out" / "report.html").exists() and (tmp_path / "out" / "aggregates.parquet").is_dir()
