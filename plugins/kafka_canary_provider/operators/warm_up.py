"""The learner warm-up as a deferrable operator: the worker slot is given back while the canary brokers catch
up; LearnerWarmUpTrigger watches the ISRs in the triggerer, then the warm-up step records the result."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any

from airflow.sdk.exceptions import AirflowException

from kafka_canary_provider.operators.rollout import RolloutStepOperator, _jsonable, broker_run
from kafka_canary_provider.triggers.warm_up import LearnerWarmUpTrigger

if TYPE_CHECKING:
    from airflow.sdk import Context

    from canary.rollout.core import RolloutRun


class LearnerWarmUpOperator(RolloutStepOperator):
    """Waits until every canary broker is in the ISR of every partition it hosts.

    :param deferrable: wait in the triggerer (default) or in the worker (the warm-up step's own loop).
    :param poll_interval: seconds between looks at the cluster.
    """

    def __init__(self, *, deferrable: bool = True, poll_interval: float = 2.0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.deferrable = deferrable
        self.poll_interval = poll_interval

    def run_step(self, rollout: RolloutRun, context: Context) -> dict:
        from canary.rollout import guard

        rollout = broker_run(rollout)
        canaries = rollout.canary_ids()
        partitions = rollout.partitions()
        behind = {b: guard.not_in_isr(b, partitions) for b in canaries}
        if not self.deferrable or not any(behind.values()):
            return self.kind().step("warm-up")(rollout)
        self.log.info("canary brokers %s still catching up: %s; deferring", canaries,
                      {b: len(p) for b, p in behind.items()})
        self.defer(trigger=LearnerWarmUpTrigger(self.kafka_canary_conn_id, canaries,
                                                timeout=rollout.spec.timeouts.warm_up,
                                                poll_interval=self.poll_interval),
                   method_name="execute_complete",
                   timeout=timedelta(seconds=rollout.spec.timeouts.warm_up + 60))
        raise AssertionError("unreachable: defer() raises")

    def execute_complete(self, context: Context, event: dict[str, Any]) -> dict:

        if event.get("status") != "in_isr":
            raise AirflowException(f"learner warm-up of brokers {event.get('broker_ids')} not done after "
                                   f"{event.get('waited_s')}s: {event.get('missing')}")
        self.log.info("canary brokers %s in every ISR after %ss", event["broker_ids"], event["waited_s"])
        rollout = self.rollout(context)
        try:
            return _jsonable(self.kind().step("warm-up")(rollout) | {"deferred_s": event["waited_s"]})
        finally:
            rollout.write_report()
