"""The analysis tests' judge config file."""

from __future__ import annotations

from pathlib import Path

import pytest
from observation_files import write_judge


@pytest.fixture
def judge_yaml(tmp_path) -> Path:
    return write_judge(tmp_path / "judge.yaml")
