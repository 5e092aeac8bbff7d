"""Where a run lives when no --run-dir is given: one place whatever directory the command starts in."""

from __future__ import annotations

from pathlib import Path

from canary.rollout.core.run import default_run_dir


def test_the_default_run_dir_is_not_the_working_directory(tmp_path, monkeypatch):
    monkeypatch.delenv("KAFKA_CANARY_RUNS", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    assert default_run_dir("r1") == tmp_path / "home/.local/state/kafka-canary/rollouts/r1"


def test_kafka_canary_runs_places_every_run(tmp_path, monkeypatch):
    monkeypatch.setenv("KAFKA_CANARY_RUNS", str(tmp_path / "runs"))
    assert default_run_dir("r1") == Path(tmp_path / "runs/r1")
