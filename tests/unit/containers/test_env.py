"""A node's config as the official image's environment variables, and a container spec kept in a label."""

from __future__ import annotations

import pytest

from canary.containers import env
from canary.containers.spec import PREVIOUS, ContainerSpec


@pytest.mark.parametrize("key, name", [
    ("num.io.threads", "KAFKA_NUM_IO_THREADS"),
    ("log.flush.interval.messages", "KAFKA_LOG_FLUSH_INTERVAL_MESSAGES"),
    ("listener.name.client.scram-sha-512.sasl.jaas.config",
     "KAFKA_LISTENER_NAME_CLIENT_SCRAM___SHA___512_SASL_JAAS_CONFIG"),
    ("confluent.metrics_reporter.topic", "KAFKA_CONFLUENT_METRICS__REPORTER_TOPIC"),
])
def test_config_keys_and_variables_map_both_ways_by_the_official_rule(key: str, name: str) -> None:
    assert env.variable(key) == name
    assert env.key_of(name) == key


def test_the_jvm_variables_and_other_variables_are_not_config() -> None:
    environment = env.parse(["KAFKA_HEAP_OPTS=-Xmx1g", "KAFKA_OPTS=-javaagent:x", "PATH=/bin", "CLUSTER_ID=abc",
                             "KAFKA_NUM_IO_THREADS=6", "KAFKA_SSL_CIPHER_SUITES=a=b"])
    assert env.config_of(environment) == {"num.io.threads": "6", "ssl.cipher.suites": "a=b"}


def test_with_config_replaces_only_the_named_keys() -> None:
    environment = {"KAFKA_NUM_IO_THREADS": "4", "KAFKA_LOG_CLEANER_THREADS": "1", "KAFKA_NODE_ID": "2", "X": "y"}
    changed = env.with_config(environment, {"num.io.threads": "6"}, replaced={"num.io.threads", "log.cleaner.threads"})
    assert changed == {"KAFKA_NUM_IO_THREADS": "6", "KAFKA_NODE_ID": "2", "X": "y"}


def test_a_spec_in_a_label_keeps_one_step_back_not_a_chain() -> None:
    older = ContainerSpec("kc-broker-1", "kafka-canary/kafka:3.9.2", {"KAFKA_NUM_IO_THREADS": "4"}, {"a": "b"},
                          mounts=[{"type": "volume", "source": "v", "target": "/var/lib/kafka/data",
                                   "read_only": False}])
    newer = older.with_image("kafka-canary/kafka:4.1.2", **{PREVIOUS: older.to_json()})
    back = ContainerSpec.from_json(newer.to_json())
    assert PREVIOUS not in back.labels and back.image == "kafka-canary/kafka:4.1.2"
    assert ContainerSpec.from_json(newer.labels[PREVIOUS]) == older
    assert older.same_node_as(ContainerSpec.from_json(older.to_json()))
    assert not older.same_node_as(newer)
