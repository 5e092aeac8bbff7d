"""Preflight: reads the cluster and the group, changes nothing, and refuses (MigrationRefused, with what to do)
when the migration cannot start: group.version not finalized >= 1, brokers that do not accept the consumer
protocol or do not let a classic group migrate, a missing or too small topic, a group with members not ours, or
one whose committed offsets move without members (consumers that assign() partitions, as lane consumers do)."""

from __future__ import annotations

import time

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

from canary.kafka import features
from canary.kafka.group_offsets import end_offsets, group_reader, short_of
from canary.kafka.settings import kafka_python_settings
from canary.rollout.migration.group import cluster_admin, describe_group, topic_partitions
from canary.rollout.migration.spec import MigrationError, MigrationRefused, MigrationSpec

# Broker policies that let a non-empty classic group take its first consumer-protocol member (KIP-848 online upgrade).
UPGRADE_POLICIES = ("upgrade", "bidirectional")
_GROUP_SETTINGS = ("group.coordinator.rebalance.protocols", "group.consumer.migration.policy",
                   "group.consumer.heartbeat.interval.ms")


def preflight(spec: MigrationSpec, timeout: float = 30.0) -> dict:
    """Reads the cluster and the group; raises MigrationRefused (nothing changed) when the migration cannot start.
    Returns the evidence: group.version, the brokers' group settings, the topic's partitions, the number of brokers,
    the group's state."""
    level, supported_max = _group_version(spec)
    admin = cluster_admin(spec)
    brokers, settings = _broker_settings(admin, timeout)
    protocols = [p.strip() for p in (settings.get("group.coordinator.rebalance.protocols") or "").split(",")]
    if "consumer" not in protocols:
        raise MigrationRefused(f"the brokers' group.coordinator.rebalance.protocols is {protocols}: add `consumer` "
                               f"(and roll the brokers) before migrating. Nothing was changed.")
    policy = settings.get("group.consumer.migration.policy") or "bidirectional"
    if policy not in UPGRADE_POLICIES:
        raise MigrationRefused(f"group.consumer.migration.policy is {policy!r}: a running classic group cannot take "
                               f"a consumer-protocol member; set it to `bidirectional` (4.x default) or `upgrade`. "
                               f"Nothing was changed.")
    partitions = _topic_with_a_partition_per_instance(spec, admin, timeout)
    group = describe_group(admin, spec.group, 2 * timeout)  # the first group lookup of a new cluster is slow
    if group["members"]:
        raise MigrationRefused(f"group {spec.group!r} has {len(group['members'])} member(s) not started by this run "
                               f"({', '.join(sorted({m['client_id'] for m in group['members']}))}); stop them, wait "
                               f"for their session timeout, or use another group. Nothing was changed.")
    moved = _commits_moving(spec, partitions)
    if moved:
        raise MigrationRefused(f"group {spec.group!r} has no member, yet its committed offsets moved within "
                               f"{spec.activity_check_s:g}s (partitions {moved}): consumers that assign() partitions "
                               f"(lane consumers) commit in it without joining; stop them, or use another group. "
                               f"Nothing was changed.")
    return {"group_version": level, "group_version_supported_max": supported_max, "rebalance_protocols": protocols,
            "migration_policy": policy, "migration_policy_is_default": settings.get("_policy_default") == "true",
            "consumer_heartbeat_interval_ms": settings.get("group.consumer.heartbeat.interval.ms"),
            "topic_partitions": len(partitions), "brokers": brokers, "group_before": group}


def _commits_moving(spec: MigrationSpec, partitions: list[int]) -> list[int]:
    """The partitions whose committed offset in the group changed over `activity_check_s` (0: not watched)."""
    if not spec.activity_check_s:
        return []
    with group_reader(spec.bootstrap_servers, spec.client, spec.group) as reader:
        ends = end_offsets(reader, spec.topic, partitions)
        before = short_of(reader, spec.topic, ends)
        time.sleep(spec.activity_check_s)
        after = short_of(reader, spec.topic, ends)
    return sorted(p for p in partitions if before.get(p, 0) != after.get(p, 0))


def _group_version(spec: MigrationSpec) -> tuple[int, int]:
    """The finalized group.version and the highest the brokers support; refuses below 1."""
    levels = features.describe(spec.bootstrap_servers, kafka_python_settings(spec.client))
    level = levels.finalized.get("group.version", 0)
    supported_max = levels.supported.get("group.version", (0, 0))[1]
    if level < 1:
        where = (f"the brokers support group.version up to {supported_max}: finalize it with `kafka-canary cluster "
                 f"finalize --feature group.version=1` (or the broker rollout's finalize step)" if supported_max >= 1
                 else "the brokers do not support it at all (Kafka < 4.0): roll every broker to Kafka 4.0 or newer "
                      "(kafka-canary rollout), then finalize group.version=1")
        raise MigrationRefused(f"group.version is finalized at {level} on {spec.bootstrap_servers}; the consumer "
                               f"group protocol (KIP-848) needs group.version >= 1, and {where}. Nothing was "
                               f"changed.")
    return level, supported_max


def _broker_settings(admin: AdminClient, timeout: float) -> tuple[int, dict[str, str | None]]:
    """The number of brokers, and the group settings of one of them (every broker of a healthy rollout runs the
    same)."""
    brokers = admin.describe_cluster(request_timeout=timeout).result(timeout=timeout + 5).nodes
    resource = ConfigResource(ResourceType.BROKER, str(min(broker.id for broker in brokers)))
    try:
        entries = admin.describe_configs([resource], request_timeout=timeout)[resource].result(timeout=timeout + 5)
    except KafkaException as exc:
        raise MigrationError(f"reading broker {resource.name}'s configuration failed: {exc.args[0].str()}") from exc
    found: dict[str, str | None] = {name: entries[name].value for name in _GROUP_SETTINGS if name in entries}
    if "group.consumer.migration.policy" in entries:
        found["_policy_default"] = str(entries["group.consumer.migration.policy"].is_default).lower()
    return len(brokers), found


def _topic_with_a_partition_per_instance(spec: MigrationSpec, admin: AdminClient, timeout: float) -> list[int]:
    partitions = topic_partitions(admin, spec.topic, timeout)
    if partitions is None:
        raise MigrationRefused(f"topic {spec.topic!r} does not exist on {spec.bootstrap_servers}; the migration "
                               f"canary consumes the service's topic and does not create it. Nothing was changed.")
    instances = spec.baseline + spec.canary
    if len(partitions) < instances:
        raise MigrationRefused(f"topic {spec.topic!r} has {len(partitions)} partition(s) for {instances} instances: "
                               f"an instance without a partition shows no disruption; use fewer instances or more "
                               f"partitions. Nothing was changed.")
    return partitions
