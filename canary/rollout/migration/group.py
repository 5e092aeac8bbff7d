"""What the cluster says about the service's topic and group: its partitions, and the group as the coordinator
sees it (state, type, members with their protocol and assignments)."""

from __future__ import annotations

import time
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

from canary.kafka.clients import QUIET_LOGGER
from canary.rollout.migration.spec import MigrationError, MigrationSpec

# A new cluster creates __consumer_offsets on first use; a moving coordinator answers the same way.
_RETRIED_DESCRIBE_ERRORS = (KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_NOT_AVAILABLE,
                            KafkaError.COORDINATOR_LOAD_IN_PROGRESS, KafkaError._TIMED_OUT)


def cluster_admin(spec: MigrationSpec) -> AdminClient:
    """An admin client on the spec's cluster: its connection settings, librdkafka's lines to the quiet logger."""
    settings: dict[str, Any] = {**spec.connection(), "logger": QUIET_LOGGER}
    return AdminClient(settings)


def topic_partitions(admin: AdminClient, topic: str, timeout: float) -> list[int] | None:
    """The topic's partitions, or None when the cluster does not know it."""
    meta = admin.list_topics(topic, timeout=timeout).topics.get(topic)
    if meta is None or meta.error is not None and meta.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
        return None
    if meta.error is not None:
        raise MigrationError(f"reading topic {topic!r} failed: {meta.error.str()}")
    return sorted(meta.partitions)


def describe_group(admin: AdminClient, group: str, timeout: float) -> dict:
    """The group as the coordinator sees it: state, type (classic/consumer), members with their assignments.
    `protocol` per member: in a CLASSIC group every member is classic (a classic group cannot hold a KIP-848
    member). In a CONSUMER group it is read from the member id: the classic coordinator names a member
    `<client.id>-<uuid>`, a KIP-848 member names itself with a bare uuid -- but a classic member that joined while
    the group was already a consumer group also gets a bare uuid from the coordinator (measured: the baseline
    instance restarted mid-window), so there "consumer" means "consumer, or classic joined mid-migration"; the
    admin API of confluent-kafka 2.16 has no per-member protocol (KIP-1099's `upgraded`)."""
    found = _describe_with_retries(admin, group, timeout)
    if found is None:
        return {"state": "DEAD", "type": "UNKNOWN", "members": []}
    group_type = getattr(found.type, "name", str(found.type))
    members = []
    for member in found.members:
        target = member.target_assignment
        classic = group_type == "CLASSIC" or member.member_id.startswith(f"{member.client_id}-")
        members.append({"client_id": member.client_id, "member_id": member.member_id,
                        "protocol": "classic" if classic else "consumer",
                        "assignment": sorted(tp.partition for tp in member.assignment.topic_partitions),
                        "target": None if target is None else sorted(tp.partition for tp in target.topic_partitions)})
    return {"state": getattr(found.state, "name", str(found.state)), "type": group_type,
            "assignor": found.partition_assignor, "members": members}


def _describe_with_retries(admin: AdminClient, group: str, timeout: float):
    """The admin client's ConsumerGroupDescription, or None when the group does not exist."""
    deadline = time.monotonic() + timeout
    while True:
        # short attempts: on a new cluster the first coordinator lookup waits for __consumer_offsets to be created
        attempt = max(1.0, min(10.0, deadline - time.monotonic()))
        try:
            return admin.describe_consumer_groups([group], request_timeout=attempt)[group].result(timeout=attempt + 5)
        except KafkaException as exc:
            code = exc.args[0].code()
            if code == KafkaError.GROUP_ID_NOT_FOUND:
                return None
            if code not in _RETRIED_DESCRIBE_ERRORS or time.monotonic() >= deadline:
                raise MigrationError(f"describing group {group!r} failed: {exc.args[0].str()}") from exc
            time.sleep(0.5)
