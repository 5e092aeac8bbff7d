"""The Spark engine without running Spark: the spark-submit command (the job shipped as package data), the Kafka
connector cache, and a failed or slow job as the library reports it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from canary.analysis import AnalysisRequest, AnalysisTimeout, ConnectorError, connector, submit
from canary.analysis.result import AnalysisResult


def test_the_command_submits_the_packaged_launcher_with_the_request(tmp_path):
    request = AnalysisRequest(tmp_path / "obs.jsonl", tmp_path / "out", from_ms=1, to_ms=2, run_id="r")
    job = Path(str(submit.JOB))
    assert job.is_file() and job.parent.name == "resources" and job.parent.parent.name == "analysis"
    cmd = submit.spark_submit_command(request, job, "local[1]")
    assert Path(cmd[0]).name == "spark-submit" and cmd[1:3] == ["--master", "local[1]"]
    assert f"spark.pyspark.python={sys.executable}" in cmd and "--jars" not in cmd
    assert cmd[cmd.index(str(job)) + 1:] == request.job_args()
    assert "from canary.analysis.job import main" in job.read_text()


def test_a_kafka_source_gets_the_cached_connector_jars(tmp_path, monkeypatch):
    monkeypatch.setenv("KAFKA_CANARY_CACHE", str(tmp_path))
    _, version = connector.pyspark_home()
    cached = tmp_path / f"spark-kafka-{version}"
    cached.mkdir()
    (cached / "spark-sql-kafka-0-10_2.13-4.2.0.jar").touch()
    (cached / ".complete").touch()
    monkeypatch.setenv("PATH", str(tmp_path))  # no mvn: the cache must do
    cmd = submit.spark_submit_command(AnalysisRequest("kafka://h:9092", tmp_path / "out"), Path("job.py"))
    assert cmd[cmd.index("--jars") + 1] == str(cached / "spark-sql-kafka-0-10_2.13-4.2.0.jar")


def test_without_maven_the_connector_is_a_one_line_error(tmp_path, monkeypatch):
    monkeypatch.setenv("KAFKA_CANARY_CACHE", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ConnectorError, match=r"Maven \(mvn\) is needed"):
        connector.kafka_connector_jars()
    assert Path(str(connector.POM)).is_file()


def test_jar_names_lose_their_version():
    assert connector.artifact("kafka-clients-3.9.2.jar") == "kafka-clients"
    assert connector.artifact("commons-pool2-2.12.1.jar") == "commons-pool2"


def _fake_tool(tmp_path: Path, name: str, script: str, monkeypatch) -> Path:
    """A shell script as `name`, alone on PATH."""
    fake = tmp_path / "bin" / name
    fake.parent.mkdir(exist_ok=True)
    fake.write_text("#!/bin/sh\n" + script)
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}:/usr/bin:/bin")
    return fake


def _fake_submit(tmp_path: Path, script: str, monkeypatch) -> None:
    fake = _fake_tool(tmp_path, "spark-submit", script, monkeypatch)
    monkeypatch.setattr(submit, "spark_submit", lambda: str(fake))


def test_a_job_that_fails_or_writes_no_verdict_gives_exit_2_and_no_verdict(tmp_path, monkeypatch):
    out = tmp_path / "out"
    out.mkdir()
    (out / "verdict.json").write_text('{"verdict": "PROMOTE"}')  # an earlier run's: must not be read
    _fake_submit(tmp_path, "echo spark says hello; exit 1\n", monkeypatch)
    result = submit.run_spark(AnalysisRequest(tmp_path, out), log=tmp_path / "spark.log")
    assert result == AnalysisResult("spark", 2, out, None, tmp_path / "spark.log")
    assert "spark says hello" in (tmp_path / "spark.log").read_text()


@pytest.mark.parametrize(("master", "given", "bound"), [
    ("local[2]", None, "127.0.0.1"), ("local[2]", "10.1.2.3", "10.1.2.3"), ("spark://127.0.0.1:7077", None, "")])
def test_a_local_driver_binds_loopback_unless_told(tmp_path, monkeypatch, master, given, bound):
    if given:
        monkeypatch.setenv("SPARK_LOCAL_IP", given)
    else:
        monkeypatch.delenv("SPARK_LOCAL_IP", raising=False)
    _fake_submit(tmp_path, "echo \"bind=$SPARK_LOCAL_IP\"; exit 1\n", monkeypatch)
    submit.run_spark(AnalysisRequest(tmp_path, tmp_path / "out"), master=master, log=tmp_path / "spark.log")
    assert f"bind={bound}\n" in (tmp_path / "spark.log").read_text()


def test_a_job_past_its_time_limit_is_a_timeout(tmp_path, monkeypatch):
    _fake_submit(tmp_path, "exec sleep 5\n", monkeypatch)
    with pytest.raises(AnalysisTimeout, match=r"did not finish within 0s; see .*spark.log"):
        submit.run_spark(AnalysisRequest(tmp_path, tmp_path / "out"), timeout=0.2, log=tmp_path / "spark.log")


def test_maven_resolves_once_falls_back_to_an_older_token_provider_and_skips_what_pyspark_ships(tmp_path,
                                                                                                monkeypatch):
    home, version = connector.pyspark_home()
    shipped = sorted((home / "jars").glob("*.jar"))[0].name
    calls = tmp_path / "calls"
    # A mirror without the newest spark-token-provider: the first resolution fails, the fallback succeeds.
    _fake_tool(tmp_path, "mvn", f"""echo "$@" >> {calls}
for a in "$@"; do case $a in -DoutputDirectory=*) out=${{a#*=}};; -Dtoken.provider.version=*) tp=${{a#*=}};; esac; done
[ "$tp" = "{version}" ] && {{ echo "[ERROR] Could not find artifact spark-token-provider"; exit 1; }}
mkdir -p $out && touch $out/spark-sql-kafka-0-10_2.13-{version}.jar $out/{shipped}
""", monkeypatch)
    monkeypatch.setenv("KAFKA_CANARY_CACHE", str(tmp_path / "cache"))
    jars = connector.kafka_connector_jars()
    assert [j.name for j in jars] == [f"spark-sql-kafka-0-10_2.13-{version}.jar"]
    assert connector.kafka_connector_jars() == jars  # cached: Maven is not asked again
    assert len(calls.read_text().splitlines()) == 2 and connector.TOKEN_PROVIDER_FALLBACK in calls.read_text()


def test_maven_failing_is_one_line_naming_its_error(tmp_path, monkeypatch):
    _fake_tool(tmp_path, "mvn", "echo '[INFO] resolving'; echo '[ERROR] Could not transfer artifact'; exit 1\n",
               monkeypatch)
    monkeypatch.setenv("KAFKA_CANARY_CACHE", str(tmp_path / "cache"))
    with pytest.raises(ConnectorError) as failed:
        connector.kafka_connector_jars()
    assert "\n" not in str(failed.value) and "[ERROR] Could not transfer artifact" in str(failed.value)
