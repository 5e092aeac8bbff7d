"""LearnerWarmUpTrigger: waits, in the triggerer, until every canary broker is back in the ISR of each
partition it hosts (docs/design.md: learner warm-up). It only reads cluster metadata, so running it twice is
harmless; the connection is looked up by id in the triggerer, so no secret is stored with the trigger."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent
from asgiref.sync import sync_to_async


class LearnerWarmUpTrigger(BaseTrigger):
    """Fires {"status": "in_isr", "waited_s"} once `broker_ids` are registered and in every ISR they belong
    to, or {"status": "timeout", "missing"} after `timeout` seconds."""

    def __init__(self, kafka_canary_conn_id: str, broker_ids: list[int], timeout: float = 300.0,
                 poll_interval: float = 2.0, started_at: float | None = None) -> None:
        super().__init__()
        self.kafka_canary_conn_id = kafka_canary_conn_id
        self.broker_ids = list(broker_ids)
        self.timeout = timeout
        self.poll_interval = poll_interval
        # Wall-clock start, kept across a triggerer restart so the timeout is not extended.
        self.started_at = started_at if started_at is not None else time.time()

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return ("kafka_canary_provider.triggers.warm_up.LearnerWarmUpTrigger", {
            "kafka_canary_conn_id": self.kafka_canary_conn_id, "broker_ids": self.broker_ids,
            "timeout": self.timeout, "poll_interval": self.poll_interval, "started_at": self.started_at})

    def _missing(self) -> str | None:
        """What is still missing (None: warm), from one look at the cluster; blocking."""
        from canary.rollout import guard
        from kafka_canary_provider.hooks.kafka_canary import KafkaCanaryHook

        hook = KafkaCanaryHook(self.kafka_canary_conn_id)
        section = hook.cluster_section()
        return guard.learner_missing(hook.bootstrap_servers(section), section["client"], self.broker_ids)

    async def run(self) -> AsyncIterator[TriggerEvent]:
        missing: str | None = "not looked yet"
        while True:
            try:
                missing = await sync_to_async(self._missing)()
            except Exception as exc:  # a restarting broker: keep looking until the timeout
                missing = f"cluster not answering: {exc}"
            waited = time.time() - self.started_at
            if missing is None:
                yield TriggerEvent({"status": "in_isr", "broker_ids": self.broker_ids, "waited_s": round(waited, 1)})
                return
            if waited > self.timeout:
                yield TriggerEvent({"status": "timeout", "broker_ids": self.broker_ids, "missing": missing,
                                    "waited_s": round(waited, 1)})
                return
            self.log.info("learner warm-up of brokers %s: %s", self.broker_ids, missing)
            await asyncio.sleep(self.poll_interval)
