"""The rollout's admin port on a real cluster (canary.rollout.core.admin.KafkaAdmin) names the request that ran out
of time: an admin future's bare TimeoutError, escaping a step, said only "TimeoutError"."""

from __future__ import annotations

import pytest

from canary.errors import ClusterError
from canary.rollout import guard
from canary.rollout.core.admin import KafkaAdmin


def test_an_admin_request_that_runs_out_of_time_is_a_cluster_error_naming_it(monkeypatch):
    def no_answer(bootstrap_servers, client=None):
        raise TimeoutError()
    monkeypatch.setattr(guard, "registered", no_answer)
    with pytest.raises(ClusterError) as err:
        KafkaAdmin("127.0.0.1:9092").registered()
    assert str(err.value).startswith("reading the registered brokers: the cluster at 127.0.0.1:9092 did not answer")
    assert isinstance(err.value.__cause__, TimeoutError)


def test_other_failures_pass_through_as_they_were(monkeypatch):
    def refused(bootstrap_servers, client=None):
        raise ClusterError("cannot read cluster metadata from 127.0.0.1:9092: refused")
    monkeypatch.setattr(guard, "observe", refused)
    with pytest.raises(ClusterError, match="^cannot read cluster metadata"):
        KafkaAdmin("127.0.0.1:9092").partitions()
