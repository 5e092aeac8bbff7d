"""A clock the broker rollout's waits run on (canary.kafka.wait): seconds pass only as they sleep."""

from __future__ import annotations

import pytest

from ..fake_cluster import VirtualClock


@pytest.fixture
def clock(monkeypatch) -> VirtualClock:
    return VirtualClock(monkeypatch, start=0.0)
