"""The load learns its partitions' leaders only from metadata that shows the whole topic: a broker answering before
it has heard of a topic just created must not start a load with a lane left out (or fail on a missing key)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

import canary.probe.load as load_module
from canary.kafka.wait import WaitTimeout
from canary.lanes import marker
from canary.probe.load import LOAD_TOPIC, Load, LoadConfig


def _metadata(leaders: dict[int, int] | None):
    topics = {} if leaders is None else {
        LOAD_TOPIC: SimpleNamespace(partitions={p: SimpleNamespace(id=p, leader=b) for p, b in leaders.items()})}
    nodes = [SimpleNamespace(id=1, rack=None), SimpleNamespace(id=2, rack=marker()), SimpleNamespace(id=3, rack=None)]
    return SimpleNamespace(topics=topics), nodes


def _answers(monkeypatch, *answers):
    seen = list(answers)
    monkeypatch.setattr(load_module, "metadata_and_brokers", lambda admin, timeout: _metadata(seen.pop(0)))
    return seen


def test_metadata_without_the_topic_is_read_again_until_every_partition_has_a_leader(monkeypatch):
    left = _answers(monkeypatch, None, {0: 1, 1: -1, 2: 3}, {0: 1, 1: 2, 2: 3})
    leaders, lanes = Load(LoadConfig("127.0.0.1:1", 10, 100))._leaders(timeout=10)
    assert leaders == {0: 1, 1: 2, 2: 3}
    assert lanes == {1: "baseline", 2: "canary", 3: "baseline"}
    assert left == []


def test_a_topic_that_never_shows_is_a_timeout_naming_it(monkeypatch):
    _answers(monkeypatch, *[None] * 5)
    with pytest.raises(WaitTimeout, match=f"load topic {LOAD_TOPIC}.*does not show the topic"):
        Load(LoadConfig("127.0.0.1:1", 10, 100))._leaders(timeout=0.5)
