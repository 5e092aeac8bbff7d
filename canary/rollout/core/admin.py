"""The cluster as a rollout's steps read and steer it through Kafka's admin API: its metadata, partitions, features
and health, preferred leader elections and replica reorders. A port, as the deployer is one: `KafkaAdmin` talks to
the cluster, and the steps' unit tests hand a run a fake that keeps the cluster in memory."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Protocol

from canary.errors import ClusterError
from canary.kafka import config_validation, features, health
from canary.kafka.admin import TopicAdmin, TopicState
from canary.kafka.clients import admin_client
from canary.kafka.settings import kafka_python_settings
from canary.rollout import guard


class ClusterAdmin(Protocol):
    """What the broker and client steps ask of the cluster (beyond the deployer, which runs its nodes)."""

    def partitions(self) -> list[guard.PartitionView]:
        """Every partition of every topic, with its topic's min.insync.replicas (what the safe-roll guard reads)."""
        ...

    def registered(self) -> dict[int, str | None]:
        """The registered, unfenced brokers and the rack each advertises."""
        ...

    def topics(self) -> set[str]: ...

    def topic(self, name: str) -> TopicState:
        """One topic's partitions, reassignments in flight and the brokers' racks."""
        ...

    def health(self, brokers: list[int], voters: list[int] | None = None) -> health.ClusterHealth:
        """One look: `brokers` registered, every partition online and replicated, `voters` caught up."""
        ...

    def lagging_voters(self, voters: list[int]) -> list[int]:
        """The controllers of `voters` not caught up with the quorum's leader (all of them when it has none)."""
        ...

    def reassignments(self) -> list[tuple[str, int]]:
        """Partitions being reassigned, as (topic, partition)."""
        ...

    def features(self) -> features.FeatureLevels: ...

    def finalize(self, wanted: dict[str, int]) -> dict[str, tuple[int, int]]:
        """Raises finalized feature levels to `wanted`; returns what changed (feature -> (before, now))."""
        ...

    def elect(self, topic: str, partitions: list[int]) -> list[str]:
        """Preferred leader elections; returns the failures."""
        ...

    def reassign(self, topic: str, targets: dict[int, list[int]]) -> None:
        """New replica lists (the same replicas reordered: no data moves)."""
        ...

    def check_broker_config(self, broker_id: int, config: dict[str, str]) -> config_validation.BrokerCheck:
        """Each value checked by the broker (validate-only: nothing changes)."""
        ...


class KafkaAdmin:
    """ClusterAdmin on a real cluster: each call one short-lived admin client, as the steps' waits look again. An
    admin request that runs out of time is a ClusterError naming it: the bare TimeoutError of an admin future says
    nothing of what was asked of whom."""

    def __init__(self, bootstrap_servers: str, client: dict[str, str] | None = None):
        self.bootstrap_servers = bootstrap_servers
        self.client = dict(client or {})

    @contextmanager
    def _asking(self, request: str) -> Iterator[None]:
        try:
            yield
        except TimeoutError as exc:
            raise ClusterError(f"{request}: the cluster at {self.bootstrap_servers} did not answer in time (a broker "
                               f"restarting or overloaded answers late; the step looks again when run again)") from exc

    def partitions(self) -> list[guard.PartitionView]:
        with self._asking("reading the partitions and their min.insync.replicas"):
            return guard.observe(self.bootstrap_servers, self.client)

    def registered(self) -> dict[int, str | None]:
        with self._asking("reading the registered brokers"):
            return guard.registered(self.bootstrap_servers, self.client)

    def topics(self) -> set[str]:
        with self._asking("listing the topics"):
            return set(admin_client(self.bootstrap_servers, self.client).list_topics(timeout=15).topics)

    def topic(self, name: str) -> TopicState:
        with self._asking(f"reading topic {name}"):
            return TopicAdmin(self.bootstrap_servers, self.client).observe(name)

    def health(self, brokers: list[int], voters: list[int] | None = None) -> health.ClusterHealth:
        with self._asking("checking the cluster's health"):
            return health.check(self.bootstrap_servers, brokers, client_config=self.client, expected_voters=voters)

    def lagging_voters(self, voters: list[int]) -> list[int]:
        with self._asking("describing the metadata quorum"):
            return health.lagging_voters(self.bootstrap_servers, voters, client_config=self.client)

    def reassignments(self) -> list[tuple[str, int]]:
        with self._asking("listing the reassignments in flight"):
            return TopicAdmin(self.bootstrap_servers, self.client).all_reassignments()

    def features(self) -> features.FeatureLevels:
        with self._asking("describing the feature levels"):
            return features.describe(self.bootstrap_servers, kafka_python_settings(self.client))

    def finalize(self, wanted: dict[str, int]) -> dict[str, tuple[int, int]]:
        with self._asking("finalizing the feature levels"):
            return features.finalize(self.bootstrap_servers, wanted, client_config=kafka_python_settings(self.client))

    def elect(self, topic: str, partitions: list[int]) -> list[str]:
        with self._asking(f"electing preferred leaders of topic {topic}"):
            return TopicAdmin(self.bootstrap_servers, self.client).elect(topic, partitions)

    def reassign(self, topic: str, targets: dict[int, list[int]]) -> None:
        with self._asking(f"reordering replicas of topic {topic}"):
            TopicAdmin(self.bootstrap_servers, self.client).reassign(topic, targets)

    def check_broker_config(self, broker_id: int, config: dict[str, str]) -> config_validation.BrokerCheck:
        with self._asking(f"validating broker {broker_id}'s config"):
            return config_validation.broker_check(self.bootstrap_servers, self.client, broker_id, config)
