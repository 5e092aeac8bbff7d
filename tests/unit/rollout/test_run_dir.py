"""Where a run lives when no --run-dir is given: one place whatever directory the command starts in."""

from __future__ import annotations

from pathlib import Path

from canary.rollout.core.run import run_store


def test_the_default_run_dir_is_not_the_working_directory(tmp_path, monkeypatch):
    monkeypatch.delenv("KAFKA_CANARY_RUNS", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    assert run_store(None, "r1").workdir() == tmp_path / "home/.local/state/kafka-canary/rollouts/r1"


def test_kafka_canary_runs_places_every_run(tmp_path, monkeypatch):
    monkeypatch.setenv("KAFKA_CANARY_RUNS", str(tmp_path / "runs"))
    assert run_store(None, "r1").workdir() == Path(tmp_path / "runs/r1")
    monkeypatch.setenv("KAFKA_CANARY_RUNS", (tmp_path / "elsewhere").as_uri())
    assert run_store(None, "r1").workdir() == Path(tmp_path / "elsewhere/r1")
