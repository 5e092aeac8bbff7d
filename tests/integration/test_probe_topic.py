"""Reconciling the canary topic on real brokers: create, no-op, scale up, scale down."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import KafkaException
from waiting import wait_until

from canary.errors import ClusterError
from canary.kafka.admin import TopicAdmin
from canary.kafka.health import metadata_and_brokers
from canary.probe.config import ProbeConfig
from canary.probe.runner import Probe
from canary.probe.topic import TopicSpec, reconcile

pytestmark = [pytest.mark.integration, pytest.mark.parallel]

MUTATING = ("create_topic", "add_partitions", "reassign", "elect", "set_configs")


class CountingAdmin(TopicAdmin):
    """The real admin, counting every call that could change the cluster."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.calls: list[str] = []
        for name in MUTATING:
            real = getattr(self, name)

            def counted(*a, _name=name, _real=real, **kw):
                self.calls.append(_name)
                return _real(*a, **kw)
            setattr(self, name, counted)


def test_reconcile_create_noop_scale_up_and_down(cluster_factory):
    cluster = cluster_factory(brokers=3, racks=["a", "b", "c"])
    spec = TopicSpec("probe-topic-test")
    admin = CountingAdmin(cluster.bootstrap_servers)

    first = reconcile(admin, spec)
    assert first.created and admin.calls == ["create_topic"]
    state = admin.observe(spec.name)
    assert sorted(state.partitions) == [0, 1, 2]
    assert {p: s.replicas[0] for p, s in state.partitions.items()} == {0: 1, 1: 2, 2: 3}
    assert {p: s.leader for p, s in state.partitions.items()} == {0: 1, 1: 2, 2: 3}
    assert all(len(set(s.replicas)) == 3 for s in state.partitions.values())
    assert state.configs["min.insync.replicas"] == "2"
    assert int(state.configs["segment.bytes"]) == spec.segment_bytes
    assert int(state.configs["retention.bytes"]) == spec.retention_bytes

    admin.calls.clear()
    again = reconcile(admin, spec)
    assert admin.calls == [] and not again.changed
    assert again.produce_partitions == {0: 1, 1: 2, 2: 3}

    new_broker = cluster.add_broker(rack="a")
    grown = reconcile(admin, spec)
    assert admin.calls == ["add_partitions"] and grown.partitions_added == [3]
    state = admin.observe(spec.name)
    assert state.partitions[3].replicas[0] == new_broker and state.partitions[3].leader == new_broker
    assert len({cluster.state.node(b).rack for b in state.partitions[3].replicas}) == 3
    assert grown.produce_partitions[3] == new_broker
    admin.calls.clear()
    assert not reconcile(admin, spec).changed and admin.calls == []

    cluster.remove_broker(new_broker, force=True)
    shrunk = reconcile(admin, spec)
    assert shrunk.orphans == [3] and 3 not in shrunk.produce_partitions
    assert 3 in shrunk.reassigned and new_broker not in shrunk.reassigned[3]
    state = admin.observe(spec.name)
    assert len(state.partitions) == 4  # partitions cannot be removed: the orphan stays
    assert new_broker not in state.partitions[3].replicas and len(state.partitions[3].replicas) == 3
    admin.calls.clear()
    settled = reconcile(admin, spec)
    assert not settled.changed and admin.calls == [] and settled.orphans == [3]

    # the probe produces to the owned partitions only, never to the orphan
    probe = Probe(ProbeConfig(cluster.bootstrap_servers, topic=spec.name, rate=20, observations_topic=""))
    probe.start()
    try:
        deadline = time.monotonic() + 60
        while not probe.ready() and time.monotonic() < deadline:
            time.sleep(0.5)
    finally:
        summary = probe.stop()
    assert sorted(summary.partitions) == [0, 1, 2]
    assert summary.lanes["baseline"]["delivered"] > 0 and summary.lanes["baseline"]["lost"] == 0


def test_while_a_rollout_holds_the_lock_a_dead_broker_keeps_its_replicas(cluster_factory):
    """A broker down while a rollout runs is one the rollout restarts (or must see down): the probe's reconcile moves
    no replica off it however long it is away, and does once the lock is gone and the grace is over."""
    from canary.rollout.core.lock import ClusterLock

    cluster = cluster_factory(brokers=3)
    spec = TopicSpec("probe-topic-lock")
    admin = CountingAdmin(cluster.bootstrap_servers, away_grace=0)  # no grace: only the lock keeps broker 3
    reconcile(admin, spec)
    lock = ClusterLock(cluster.bootstrap_servers)
    assert lock.acquire("rollout-1", brokers=3)
    cluster.stop_node(3, kill=True)
    # A killed broker stays in the metadata until its session times out; only then is it away.
    wait_until(lambda: 3 not in _registered(admin), 60, "broker 3 fenced")
    admin.calls.clear()
    during = _reconciled(admin, spec)
    assert _observed(admin, spec).rollout_running
    assert "reassign" not in admin.calls and not during.orphans and 3 in during.owners
    assert lock.release("rollout-1")
    # The lock topic's deletion reaches each broker's metadata a moment later, and the metadata may come from any
    # broker: until one that answers has seen it, the lock still holds. The probe reconciles at every interval.
    wait_until(lambda: not _observed(admin, spec).rollout_running, 30, "the lock topic gone from the metadata")
    after = wait_until(lambda: _reassigning(admin, spec), 30, "a reconcile that moves broker 3's replicas")
    assert after.orphans == [2] and 3 not in after.owners  # broker 3's partition, moved onto live brokers


def _observed(admin: TopicAdmin, spec: TopicSpec):
    """The topic as the cluster describes it."""
    return _retried(lambda: admin.observe(spec.name))


def _registered(admin: TopicAdmin) -> set[int]:
    """The brokers in the cluster's metadata, whether or not a rollout holds the lock."""
    def nodes():
        try:
            return {node.id for node in metadata_and_brokers(admin.admin, 10)[1]}
        except KafkaException as exc:
            raise ClusterError(str(exc)) from exc
    return _retried(nodes)


def _reconciled(admin: TopicAdmin, spec: TopicSpec):
    """One reconcile, as the probe's periodic one (which retries at its next interval)."""
    return _retried(lambda: reconcile(admin, spec, wait=0))


def _reassigning(admin: TopicAdmin, spec: TopicSpec):
    """One reconcile; its result if it reassigned, else None (waited on again)."""
    admin.calls.clear()
    result = _reconciled(admin, spec)
    return result if "reassign" in admin.calls else None


def _retried(call):
    """While the killed broker is still in the clients' metadata a call may reach it: refused (ClusterError) or
    timed out (an admin future's TimeoutError, seen in a fresh clone); retried for up to ~20 s."""
    for _ in range(20):
        try:
            return call()
        except (ClusterError, TimeoutError):
            time.sleep(1)
    return call()
