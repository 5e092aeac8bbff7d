"""Replica reorders through kafka-python are asked again on a fresh client when the connection breaks (a broker a
rollout restarted a moment ago dropped it: a promotion's drain failed so once), and give up naming the error."""

from __future__ import annotations

import pytest
from kafka.errors import KafkaConnectionError

from canary.errors import ClusterError
from canary.kafka import admin as admin_module
from canary.kafka.admin import TopicAdmin


class FlakyAdmin:
    def __init__(self, log: list[str], breaks: int):
        self.log, self.breaks = log, breaks

    def alter_partition_reassignments(self, wanted, timeout_ms):
        self.log.append("alter")
        if self.log.count("alter") <= self.breaks:
            raise KafkaConnectionError("socket disconnected")
        return {tp: None for tp in wanted}

    def close(self):
        self.log.append("close")


@pytest.fixture
def no_sleep(monkeypatch):
    monkeypatch.setattr(admin_module.time, "sleep", lambda s: None)


def admin_with(monkeypatch, breaks: int) -> tuple[TopicAdmin, list[str]]:
    log: list[str] = []
    topic_admin = TopicAdmin("127.0.0.1:1", {})
    monkeypatch.setattr(topic_admin, "_kafka_python", lambda: FlakyAdmin(log, breaks))
    return topic_admin, log


def test_a_dropped_connection_is_asked_again_on_a_fresh_client(monkeypatch, no_sleep):
    topic_admin, log = admin_with(monkeypatch, breaks=2)
    topic_admin.reassign("orders", {0: [2, 1, 3]})
    assert log == ["alter", "close"] * 3


def test_a_connection_that_stays_broken_fails_naming_it(monkeypatch, no_sleep):
    topic_admin, log = admin_with(monkeypatch, breaks=99)
    with pytest.raises(ClusterError, match="reassigning partitions of orders failed: .*socket disconnected"):
        topic_admin.reassign("orders", {0: [2, 1, 3]})
    assert log.count("alter") == admin_module.CONNECTION_TRIES
