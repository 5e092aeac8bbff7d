"""One rollout per cluster: a lock that lives on the cluster itself, so it holds across processes, hosts and
Airflow workers, and survives the process that took it.

The lock is the topic `__kafka_canary_rollout_lock`: creating a topic is atomic, so exactly one rollout
creates it, then writes its holder record (run id, host, pid, time) into it. The same run id taking it again
is a harmless repeat (a retried task). Finishing a rollout deletes the topic. A stale lock (its rollout
crashed and will not be resumed) is broken with `kafka-canary rollout unlock --spec FILE --force`.
"""

from __future__ import annotations

import json
import os
import socket
import time

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from canary.errors import CanaryError, ClusterError
from canary.kafka.admin import ROLLOUT_LOCK_TOPIC, TopicAdmin
from canary.kafka.clients import QUIET_LOGGER, admin_client


class LockHeld(CanaryError):
    """Another rollout holds the cluster."""


def _holder_record(run_id: str) -> dict:
    return {"run_id": run_id, "host": socket.gethostname(), "pid": os.getpid(), "taken_ms": int(time.time() * 1000)}


class ClusterLock:
    def __init__(self, bootstrap_servers: str, client: dict[str, str] | None = None, timeout: float = 30.0):
        self.bootstrap_servers = bootstrap_servers
        self.client = dict(client or {})
        self.timeout = timeout

    def holder(self) -> dict | None:
        """The holder record, {} when the lock exists without one (being taken, or its taker crashed),
        None when nobody holds the lock."""
        metadata = admin_client(self.bootstrap_servers, self.client).list_topics(timeout=self.timeout)
        if ROLLOUT_LOCK_TOPIC not in metadata.topics:
            return None
        consumer = Consumer({"bootstrap.servers": self.bootstrap_servers, "group.id": "kafka-canary-lock-reader",
                             "enable.auto.commit": False, "logger": QUIET_LOGGER, **self.client})
        try:
            low, high = consumer.get_watermark_offsets(TopicPartition(ROLLOUT_LOCK_TOPIC, 0), timeout=self.timeout)
            if high <= low:
                return {}
            consumer.assign([TopicPartition(ROLLOUT_LOCK_TOPIC, 0, high - 1)])
            deadline = time.monotonic() + self.timeout
            while time.monotonic() < deadline:
                msg = consumer.poll(0.5)
                if msg is not None and msg.error() is None:
                    try:
                        record = json.loads(msg.value() or b"")
                    except ValueError:
                        return {}
                    return record if isinstance(record, dict) else {}
            return {}
        except KafkaException as exc:
            raise ClusterError(f"reading the rollout lock on {self.bootstrap_servers} failed: {exc.args[0]}") from exc
        finally:
            consumer.close()

    def acquire(self, run_id: str, brokers: int) -> bool:
        """Takes the lock for `run_id`; True when newly taken, False when `run_id` already held it.
        Raises LockHeld naming the holder and how to break a stale lock."""
        admin = TopicAdmin(self.bootstrap_servers, self.client, self.timeout)
        rf = min(3, max(1, brokers))
        if admin.create_topic(ROLLOUT_LOCK_TOPIC, _assignment(admin, rf), {}):
            producer = Producer({"bootstrap.servers": self.bootstrap_servers, "acks": "all", "logger": QUIET_LOGGER,
                                 **self.client})
            producer.produce(ROLLOUT_LOCK_TOPIC, json.dumps(_holder_record(run_id)).encode(), partition=0)
            if producer.flush(self.timeout) != 0:
                raise ClusterError(f"could not record the rollout lock's holder on {self.bootstrap_servers}")
            return True
        holder = self.holder()
        if holder and holder.get("run_id") == run_id:
            return False
        who = (f"rollout {holder['run_id']} (host {holder.get('host')}, pid {holder.get('pid')}, taken at "
               f"{time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime(holder.get('taken_ms', 0) / 1000))} UTC)"
               if holder else "a rollout that has not recorded its id (it is starting, or crashed while starting)")
        raise LockHeld(f"the cluster at {self.bootstrap_servers} is held by {who}; wait for it to finish, or if it "
                       f"is dead and will not be resumed, break the lock with "
                       f"`kafka-canary rollout unlock --spec FILE --force`")

    def release(self, run_id: str) -> bool:
        """Deletes the lock if `run_id` holds it; True when it did."""
        holder = self.holder()
        if holder is None or holder.get("run_id") != run_id:
            return False
        self._delete()
        return True

    def force_release(self) -> dict | None:
        """Breaks the lock whoever holds it; returns the holder record it removed."""
        holder = self.holder()
        if holder is not None:
            self._delete()
        return holder

    def _delete(self) -> None:
        # A broker killed moments ago still counts as alive in the metadata for its session timeout, and the
        # client may pick it as the controller to ask: that times out. A rollout releases its lock exactly when a
        # broker may be down, so a timed-out delete is asked again (a fresh client, fresh metadata) until the deadline.
        deadline = time.monotonic() + self.timeout
        while True:
            admin = admin_client(self.bootstrap_servers, self.client)
            try:
                for future in admin.delete_topics([ROLLOUT_LOCK_TOPIC], operation_timeout=self.timeout).values():
                    future.result(timeout=self.timeout)
                break
            except KafkaException as exc:
                error = exc.args[0]
                if error.name() == "UNKNOWN_TOPIC_OR_PART":
                    break
                if error.code() != KafkaError._TIMED_OUT or time.monotonic() >= deadline:
                    raise ClusterError(f"deleting the rollout lock {ROLLOUT_LOCK_TOPIC} failed: "
                                       f"{error.str()}") from exc
                time.sleep(1.0)
        # Topic deletion finishes asynchronously; wait so the next rollout can take the lock at once.
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline and ROLLOUT_LOCK_TOPIC in admin.list_topics(timeout=self.timeout).topics:
            time.sleep(0.2)


def _assignment(admin: TopicAdmin, rf: int) -> list[list[int]]:
    brokers = sorted(admin.observe(ROLLOUT_LOCK_TOPIC).brokers)
    return [brokers[:rf]]
