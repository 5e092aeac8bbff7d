"""Where a consumer group stands in a topic: the topic's end offsets, and how far the group's committed offsets are
short of given ends. A client rollout's drain and the migration canary's verify wait on it."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as TP

from canary.kafka.clients import QUIET_LOGGER


@contextmanager
def group_reader(bootstrap: str, client: Mapping[str, str], group: str) -> Iterator[Consumer]:
    """A consumer in `group` that never subscribes nor commits: it only reads offsets."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                         "logger": QUIET_LOGGER, **client})
    try:
        yield consumer
    finally:
        consumer.close()


def end_offsets(consumer: Consumer, topic: str, partitions: list[int]) -> dict[int, int]:
    """Each partition's end offset (the next offset to be written), read from its leader now."""
    return {p: consumer.get_watermark_offsets(TP(topic, p), timeout=10, cached=False)[1] for p in partitions}


def short_of(consumer: Consumer, topic: str, ends: Mapping[int, int]) -> dict[int, int]:
    """Per partition, the records between the group's committed offset (none: the start) and `ends`; partitions the
    group has committed up to their end are left out."""
    committed = consumer.committed([TP(topic, p) for p in ends], timeout=10)
    return {tp.partition: ends[tp.partition] - max(tp.offset, 0) for tp in committed
            if ends[tp.partition] > max(tp.offset, 0)}
