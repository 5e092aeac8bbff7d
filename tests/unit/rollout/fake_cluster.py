"""A Kafka cluster in memory, for the unit tests of the rollout steps: both ports of a run, the deployer (its
brokers and controllers) and the admin (metadata, elections, features). It behaves as the steps rely on: a broker
restarted gives up the leadership of its partitions to the next replica in the ISR and, after `catch_up` looks at
the partitions, is back in every ISR; a preferred leader election succeeds when the preferred replica is in the ISR;
a reordered replica list shows at once. The rolls of the brokers in `together` wait for each other (a batch must
restart at once). Every change is logged in `changes`."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field, replace

from canary.kafka.admin import PartitionState, TopicState
from canary.kafka.config_validation import BrokerCheck
from canary.kafka.features import FeatureLevels
from canary.kafka.health import ClusterHealth
from canary.probe.view import ProbeSummary
from canary.rollout.deployers.base import BrokerInfo, ControllerInfo
from canary.rollout.guard import PartitionView


@dataclass
class Partition:
    replicas: list[int]
    isr: list[int]
    leader: int
    min_isr: int


@dataclass
class FakeCluster:
    brokers_: dict[int, BrokerInfo] = field(default_factory=dict)
    parts: dict[tuple[str, int], Partition] = field(default_factory=dict)
    controller_version: str = "3.9.2"
    levels: dict[str, int] = field(default_factory=lambda: {"metadata.version": 21})
    supported: dict[str, tuple[int, int]] = field(default_factory=lambda: {"metadata.version": (1, 27)})
    catch_up: int = 0                       # looks at the partitions a restarted broker takes to rejoin the ISRs
    refused: dict[str, str] = field(default_factory=dict)   # config key -> the broker's message
    moving: list[tuple[str, int]] = field(default_factory=list)  # reassignments in flight
    changes: list[tuple] = field(default_factory=list)
    behind: dict[int, int] = field(default_factory=dict)    # broker -> looks until it is back in the ISRs
    shortest_isr: int = 1_000                                # the smallest ISR right after any restart
    controller_ids: tuple[int, ...] = (3000,)
    lagging: set[int] = field(default_factory=set)           # controllers not caught up with the quorum
    led_at_roll: list[tuple[int, int]] = field(default_factory=list)  # (broker, partitions it led) at each roll
    failing: set[int] = field(default_factory=set)           # brokers whose roll fails (a deployer error)
    together: dict[int, threading.Barrier] = field(default_factory=dict)  # broker -> a barrier its roll waits at

    bootstrap_servers = "fake:9092"
    capabilities = frozenset({"controllers", "stop_start"})

    @classmethod
    def of(cls, brokers: int = 3, topics: dict[str, int] | None = None, replication: int = 3, min_isr: int = 2,
           config: dict[str, str] | None = None, version: str = "3.9.2", **kwargs) -> FakeCluster:
        """`brokers` brokers (ids 1..n) on `version` with `config`; each topic's partitions spread round-robin,
        each led by its preferred replica."""
        ids = list(range(1, brokers + 1))
        cluster = cls(brokers_={i: BrokerInfo(i, version, dict(config or {}), None, True) for i in ids}, **kwargs)
        for topic, count in (topics or {"orders": 6}).items():
            for p in range(count):
                replicas = [ids[(p + k) % len(ids)] for k in range(replication)]
                cluster.parts[(topic, p)] = Partition(replicas, list(replicas), replicas[0], min_isr)
        return cluster

    # ----- the deployer port -----

    def brokers(self) -> list[BrokerInfo]:
        return [self.brokers_[i] for i in sorted(self.brokers_)]

    def controllers(self) -> list[ControllerInfo]:
        return [ControllerInfo(c, self.controller_version, True) for c in self.controller_ids]

    def prepare(self, version: str) -> None:
        pass

    def roll_broker(self, broker_id: int, *, version: str, config: dict[str, str], rack: str | None,
                    client_delay_ms: float = 0.0) -> None:
        if broker_id in self.together:
            self.together[broker_id].wait()  # BrokenBarrierError unless the barrier's other rolls run at once
        if broker_id in self.failing:
            raise RuntimeError(f"broker {broker_id}: the deployer's roll failed")
        self.led_at_roll.append((broker_id, len(self.led_by(broker_id))))
        self.changes.append(("roll", broker_id, version, dict(config), rack))
        self.brokers_[broker_id] = BrokerInfo(broker_id, version, dict(config), rack, True, client_delay_ms)
        for p in self.parts.values():
            if broker_id not in p.replicas:
                continue
            if self.catch_up:
                p.isr = [b for b in p.isr if b != broker_id]
            if p.leader == broker_id:
                p.leader = next((b for b in p.replicas if b in p.isr and b != broker_id), -1)
        if self.catch_up:
            self.behind[broker_id] = self.catch_up
        self.shortest_isr = min([self.shortest_isr, *(len(p.isr) for p in self.parts.values())])

    def roll_controller(self, node_id: int, *, version: str) -> None:
        self.changes.append(("roll controller", node_id, version))
        self.controller_version = version

    def process_running(self, broker_id: int) -> bool | None:
        return self.brokers_[broker_id].running

    def exit_cause(self, broker_id: int) -> str | None:
        return None

    def stop_broker(self, broker_id: int) -> None:
        self.brokers_[broker_id] = replace(self.brokers_[broker_id], running=False)

    def start_broker(self, broker_id: int) -> None:
        self.brokers_[broker_id] = replace(self.brokers_[broker_id], running=True)

    def broker_metrics(self) -> None:
        return None

    # ----- the admin port -----

    def partitions(self) -> list[PartitionView]:
        for broker_id in list(self.behind):
            self.behind[broker_id] -= 1
            if self.behind[broker_id] <= 0:
                del self.behind[broker_id]
                for p in self.parts.values():
                    if broker_id in p.replicas and broker_id not in p.isr:
                        p.isr.append(broker_id)
        return [PartitionView(t, n, tuple(p.replicas), tuple(p.isr), p.leader, p.min_isr)
                for (t, n), p in sorted(self.parts.items())]

    def registered(self) -> dict[int, str | None]:
        return {b.broker_id: b.rack for b in self.brokers() if b.running}

    def topics(self) -> set[str]:
        return {t for t, _ in self.parts}

    def topic(self, name: str) -> TopicState:
        parts = {n: PartitionState(tuple(p.replicas), p.leader, tuple(p.isr))
                 for (t, n), p in sorted(self.parts.items()) if t == name}
        return TopicState(self.registered(), bool(parts), parts,
                          reassigning=frozenset(n for t, n in self.moving if t == name))

    def health(self, brokers: list[int], voters: list[int] | None = None) -> ClusterHealth:
        views = self.partitions()
        return ClusterHealth(sorted(brokers), sorted(self.registered()),
                             offline_partitions=[v.name for v in views if v.leader < 0],
                             under_replicated=[v.name for v in views if len(v.isr) < len(v.replicas)])

    def lagging_voters(self, voters: list[int]) -> list[int]:
        return sorted(self.lagging & set(voters))

    def reassignments(self) -> list[tuple[str, int]]:
        return list(self.moving)

    def features(self) -> FeatureLevels:
        return FeatureLevels(dict(self.levels), dict(self.supported), 1)

    def finalize(self, wanted: dict[str, int]) -> dict[str, tuple[int, int]]:
        changed = {f: (self.levels.get(f, 0), level) for f, level in wanted.items() if level > self.levels.get(f, 0)}
        self.levels.update({f: new for f, (_, new) in changed.items()})
        self.changes += [("finalize", f, new) for f, (_, new) in changed.items()]
        return changed

    def elect(self, topic: str, partitions: list[int]) -> list[str]:
        failures = []
        for n in partitions:
            p = self.parts[(topic, n)]
            if p.replicas[0] in p.isr:
                if p.leader != p.replicas[0]:
                    self.changes.append(("elect", f"{topic}-{n}", p.replicas[0]))
                p.leader = p.replicas[0]
            else:
                failures.append(f"{topic}-{n}: preferred replica {p.replicas[0]} not in the ISR")
        return failures

    def reassign(self, topic: str, targets: dict[int, list[int]]) -> None:
        for n, replicas in targets.items():
            p = self.parts[(topic, n)]
            assert sorted(replicas) == sorted(p.replicas), "a reorder moves no data"
            self.changes.append(("reorder", f"{topic}-{n}", list(replicas)))
            p.replicas = list(replicas)

    def check_broker_config(self, broker_id: int, config: dict[str, str]) -> BrokerCheck:
        return BrokerCheck(refused={k: m for k, m in self.refused.items() if k in config})

    # ----- what the tests look at -----

    def rolls(self) -> list[int]:
        return [c[1] for c in self.changes if c[0] == "roll"]

    def led_by(self, broker_id: int, topic: str | None = None) -> list[str]:
        return [f"{t}-{n}" for (t, n), p in sorted(self.parts.items())
                if p.leader == broker_id and topic in (None, t)]


class FakeProbes:
    """The broker rollout's probe port: each probe opened is named in `opened` and acknowledges what it sent, but
    for the phases named in `losing`, whose probes lose a message."""

    def __init__(self, losing: tuple[str, ...] = ()):
        self.opened: list[str] = []
        self.losing = losing

    def __call__(self, config, broker_metrics) -> FakeProbe:
        self.opened.append(config.run_id)
        return FakeProbe(config.run_id, any(config.run_id.split("-", 1)[1].startswith(p) for p in self.losing))


@dataclass
class FakeProbe:
    run_id: str
    losing: bool

    def start(self) -> None:
        pass

    def run(self) -> ProbeSummary:
        return self.stop()

    def stop(self, drain: float | None = None) -> ProbeSummary:
        lane = {"sent": 100, "acked": 100, "lost": 1 if self.losing else 0, "produce_errors": 0}
        return ProbeSummary(self.run_id, "fake", "__kafka_canary", 1.0, {"canary": lane, "baseline": dict(lane)},
                            {}, 0, 0, {}, {}, None)


class VirtualClock:
    """time.monotonic and time.sleep on a clock of its own: the steps' waits and timeouts run in no real time.
    Only the test's own thread is on it: a thread left by an earlier test (a client's poller) that sleeps would
    otherwise move the clock by hours and see it stand still."""

    def __init__(self, monkeypatch, start: float = 1000.0):
        self.now = start
        self._owner = threading.get_ident()
        real_monotonic, real_sleep = time.monotonic, time.sleep
        monkeypatch.setattr(time, "monotonic", lambda: self.now if self._ours() else real_monotonic())
        monkeypatch.setattr(time, "sleep", lambda s: self._advance(s) if self._ours() else real_sleep(s))

    def _ours(self) -> bool:
        return threading.get_ident() == self._owner

    def _advance(self, seconds: float) -> None:
        self.now += seconds
