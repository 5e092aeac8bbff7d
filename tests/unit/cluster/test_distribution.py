from pathlib import Path

import pytest

from canary.cluster import distribution
from canary.errors import SetupError


@pytest.mark.parametrize("bad", ["banana", "4.1", "4.1.2.3", "", " v3.9.2", "3.9.x"])
def test_malformed_versions_are_refused_with_an_example(bad):
    with pytest.raises(SetupError, match="MAJOR.MINOR.PATCH"):
        distribution.parse_version(bad)


def test_versions_before_kraft_support_are_refused():
    with pytest.raises(SetupError, match="too old"):
        distribution.parse_version("2.8.2")


def test_release_of_a_version():
    assert distribution.release_of("4.1.2") == "4.1"
    assert distribution.release_of("3.9.0") == "3.9"


def test_defaults_are_a_39_baseline_and_a_newer_4x_target():
    base, target = distribution.parse_version(distribution.BASELINE_VERSION), \
        distribution.parse_version(distribution.TARGET_VERSION)
    assert base[:2] == (3, 9) and target[0] == 4


def test_kafka_home_overrides_for_the_version_it_holds(tmp_path, monkeypatch):
    (tmp_path / "libs").mkdir()
    (tmp_path / "libs" / "kafka_2.13-3.8.1.jar").write_bytes(b"")
    monkeypatch.setenv("KAFKA_HOME", str(tmp_path))
    monkeypatch.setenv("KAFKA_CANARY_CACHE", str(tmp_path / "cache"))
    found = distribution.installed("3.8.1")
    assert found == distribution.KafkaDistribution("3.8.1", tmp_path / "libs", "KAFKA_HOME")
    assert distribution.installed("3.8.0") is None  # other versions still come from Maven


def test_kafka_home_without_libs_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("KAFKA_HOME", str(tmp_path))
    with pytest.raises(SetupError, match="no libs/ directory"):
        distribution.installed("3.9.2")


def test_missing_java_says_what_to_install(monkeypatch, tmp_path):
    distribution.require_java.cache_clear()
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    try:
        with pytest.raises(SetupError, match="Java 17 or newer is needed"):
            distribution.require_java()
    finally:
        distribution.require_java.cache_clear()


def test_missing_maven_says_what_to_install(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(SetupError, match="Maven is needed"):
        distribution.require_maven()


def test_log_config_matches_the_logging_backend_of_the_release():
    old = distribution.KafkaDistribution("3.9.2", Path("/x"), "maven")
    new = distribution.KafkaDistribution("4.1.2", Path("/x"), "maven")
    assert old.log_config_props(tool=False)[0].startswith("-Dlog4j.configuration=file:")
    assert new.log_config_props(tool=False)[0].startswith("-Dlog4j2.configurationFile=")
    for flag in old.log_config_props(False) + new.log_config_props(True):
        assert Path(flag.split("=", 1)[1].removeprefix("file:")).exists()
