"""One broker rollout run: the spec, the run state, the three ports its steps reach the cluster through (the
deployer, the admin, the probe), and what the steps ask of the cluster (its partitions as the safe-roll guard sees
them, the canary brokers, one broker's deployed state)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import cast

from canary.broker_metrics.sources import BrokerMetricsSource
from canary.judge.config import JudgeConfig
from canary.probe.config import ProbeConfig
from canary.probe.runner import Probe
from canary.rollout import guard
from canary.rollout.broker.record import BrokerRunRecord, BrokerSnapshot
from canary.rollout.broker.report import BROKER_REPORT
from canary.rollout.broker.spec import BrokerRolloutSpec
from canary.rollout.core import ClusterRun, RolloutError
from canary.rollout.core.admin import ClusterAdmin
from canary.rollout.core.run import RunState
from canary.rollout.deployers.base import BrokerInfo, Deployer
from canary.rollout.report import write_report
from canary.storage import Store

PROBE_TOPIC = "__kafka_canary"
# The probe port: a probe of one phase (canary.rollout.broker.probes), the brokers' own metrics read beside it.
OpenProbe = Callable[[ProbeConfig, BrokerMetricsSource | None], Probe]


def _probe(config: ProbeConfig, broker_metrics: BrokerMetricsSource | None) -> Probe:
    return Probe(config, broker_metrics=broker_metrics)


class Rollout(ClusterRun):
    """One broker rollout."""

    RECORD = BrokerRunRecord
    spec: BrokerRolloutSpec
    state: RunState[BrokerRunRecord]

    def __init__(self, spec: BrokerRolloutSpec, run_dir: str | Path | Store | None = None,
                 deployer: Deployer | None = None, admin: ClusterAdmin | None = None, probe: OpenProbe = _probe):
        super().__init__(spec, run_dir, deployer, admin)
        self.open_probe = probe

    @property
    def record(self) -> BrokerRunRecord:
        return self.state.record

    @property
    def snapshot(self) -> BrokerSnapshot:
        """The pre-rollout snapshot preflight took (RunStateError before)."""
        return cast(BrokerSnapshot, self.state.snapshot)

    def write_report(self) -> Path:
        return write_report(self.state, self.audit, BROKER_REPORT)

    def partitions(self) -> list[guard.PartitionView]:
        return self.admin.partitions()

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
