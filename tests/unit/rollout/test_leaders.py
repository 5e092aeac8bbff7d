"""Preferred leader elections repeated until led: an election that shows at once costs no pause, one whose replica
is still catching up is asked again, one that never takes gives up at its timeout naming what is still off."""

from __future__ import annotations

from types import SimpleNamespace

from canary.rollout import leaders

from .fake_cluster import FakeCluster, VirtualClock


class LaggingCluster(FakeCluster):
    """Elections take only once the metadata has been read `lag` more times (a controller a moment behind)."""

    lag: int = 0

    def elect(self, topic: str, partitions: list[int]) -> list[str]:
        self.asked = getattr(self, "asked", 0) + 1
        self.pending = [(topic, n) for n in partitions]
        self.looks_left = self.lag
        return []

    def partitions(self):
        if getattr(self, "pending", None):
            if self.looks_left <= 0:
                for key in self.pending:
                    p = self.parts[key]
                    if p.replicas[0] in p.isr:
                        p.leader = p.replicas[0]
                self.pending = []
            self.looks_left -= 1
        return super().partitions()


def run_on(cluster: FakeCluster) -> SimpleNamespace:
    return SimpleNamespace(partitions=cluster.partitions, admin=cluster, step="promote", say=lambda *a: None,
                           audit=SimpleNamespace(record=lambda *a, **k: None))


def off_preferred(cluster: FakeCluster) -> FakeCluster:
    """Every partition led by its second replica."""
    for p in cluster.parts.values():
        p.leader = p.replicas[1]
    return cluster


def not_preferred(parts) -> list[str]:
    return [p.name for p in parts if p.leader != p.replicas[0]]


def test_an_election_that_shows_at_once_returns_at_once(monkeypatch):
    clock = VirtualClock(monkeypatch, start=0.0)
    cluster = off_preferred(LaggingCluster.of(brokers=3))
    elected, off = leaders.elect_until_led(run_on(cluster), not_preferred)
    assert (len(elected), off, cluster.asked) == (6, [], 1)
    assert clock.now == 0.0  # no fixed pause after the election


def test_an_election_a_moment_behind_is_looked_for_not_asked_again(monkeypatch):
    clock = VirtualClock(monkeypatch, start=0.0)
    cluster = off_preferred(LaggingCluster.of(brokers=3))
    cluster.lag = 3
    elected, off = leaders.elect_until_led(run_on(cluster), not_preferred)
    assert (len(elected), off, cluster.asked) == (6, [], 1)
    assert 0 < clock.now <= 3 * leaders.SETTLE_POLL + 1e-9 < leaders.ELECTION_SETTLE


def test_a_preferred_replica_out_of_the_isr_is_elected_again_until_the_timeout(monkeypatch):
    clock = VirtualClock(monkeypatch, start=0.0)
    cluster = off_preferred(LaggingCluster.of(brokers=3))
    for p in cluster.parts.values():
        p.isr.remove(p.replicas[0])
    elected, off = leaders.elect_until_led(run_on(cluster), not_preferred, timeout=10)
    assert len(off) == 6 and cluster.asked >= 10 / leaders.ELECTION_SETTLE - 1
    assert 10 <= clock.now <= 10 + leaders.ELECTION_SETTLE + leaders.SETTLE_POLL


def test_orders_avoiding_moves_the_avoided_brokers_last_and_leaves_the_rest():
    def view(topic: str, n: int, replicas: list[int]):
        return SimpleNamespace(topic=topic, partition=n, replicas=replicas, name=f"{topic}-{n}")
    parts = [view("obs", 0, [3, 1, 2]), view("obs", 1, [1, 3, 2]), view("obs", 2, [2, 3, 4]), view("obs", 3, [3, 4]),
             view("orders", 0, [3, 1, 2])]
    assert leaders.orders_avoiding(parts, "obs", [3]) == {"obs-0": [1, 2, 3], "obs-3": [4, 3]}
    assert leaders.orders_avoiding(parts, "obs", [3, 4]) == {"obs-0": [1, 2, 3]}  # obs-3: every replica avoided
