"""Fixtures of the lane-aware clients' unit tests (fakes in client_fakes.py)."""

from __future__ import annotations

import pytest
from client_fakes import lanes_of
from prometheus_client import CollectorRegistry

from canary.clients import ClientMetrics, TopicLanes


@pytest.fixture
def metrics() -> ClientMetrics:
    return ClientMetrics(CollectorRegistry())


@pytest.fixture
def six_partitions() -> TopicLanes:
    return lanes_of("orders", {p: p % 3 + 1 for p in range(6)})
