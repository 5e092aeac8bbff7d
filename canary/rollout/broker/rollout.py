"""One broker rollout run: the spec, the deployer of the cluster, the run state, and what the steps ask of the
cluster (its partitions as the safe-roll guard sees them, the canary brokers, one broker's deployed state)."""

from __future__ import annotations

from canary.judge.config import JudgeConfig
from canary.rollout import guard
from canary.rollout.broker.spec import BrokerRolloutSpec
from canary.rollout.core import ClusterRun, RolloutError
from canary.rollout.deployers.base import BrokerInfo

PROBE_TOPIC = "__kafka_canary"


class Rollout(ClusterRun):
    """One broker rollout."""

    spec: BrokerRolloutSpec

    def partitions(self) -> list[guard.PartitionView]:
        return guard.observe(self.bootstrap_servers, self.spec.client)

    def canary_ids(self) -> list[int]:
        ids = self.state.record.canary_brokers
        if ids is None:
            raise RolloutError("preflight has not chosen the canary brokers yet; run `kafka-canary rollout "
                               "preflight` first")
        return ids

    def judge_config(self) -> JudgeConfig:
        """The judge's settings for this run: the spec's, with the control brokers the canary is compared with."""
        return self.spec.judge.settings().changed(control_brokers=self.control_ids())

    def control_ids(self) -> list[int]:
        """The control brokers preflight chose (canary.rollout.broker.control); none for a run that chose before
        they existed."""
        return self.state.record.control_brokers or []

    def broker(self, broker_id: int) -> BrokerInfo:
        for b in self.deployer.brokers():
            if b.broker_id == broker_id:
                return b
        raise RolloutError(f"broker {broker_id} is no longer in the cluster")
