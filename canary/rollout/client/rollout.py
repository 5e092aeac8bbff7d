"""One client rollout run: a rollout run on the cluster (its broker deployer, run directory, lock) with the
service deployer of the service's fleet, and the fleet each lane should have."""

from __future__ import annotations

from pathlib import Path
from typing import cast

from canary import lanes
from canary.clients.deployer import Instance, ServiceDeployer
from canary.kafka.admin import TopicState
from canary.rollout.client.record import ClientRunRecord, ClientSnapshot
from canary.rollout.client.report import CLIENT_REPORT
from canary.rollout.client.spec import ClientRolloutSpec
from canary.rollout.core import ClusterRun
from canary.rollout.core.admin import ClusterAdmin
from canary.rollout.core.run import RunState
from canary.rollout.deployers.base import Deployer
from canary.rollout.guard import PartitionView
from canary.rollout.report import write_report


class ClientRollout(ClusterRun):
    """One client rollout: a rollout run (spec, broker deployer to reach the cluster, run directory, lock) with the
    service deployer of its fleet."""

    LOG_PREFIX = "client "
    RECORD = ClientRunRecord
    spec: ClientRolloutSpec
    state: RunState[ClientRunRecord]

    def __init__(self, spec: ClientRolloutSpec, run_dir: str | Path | None = None, deployer: Deployer | None = None,
                 services: ServiceDeployer | None = None, tie_to_parent: bool = False,
                 admin: ClusterAdmin | None = None):
        super().__init__(spec, run_dir, deployer, admin)
        svc = spec.service
        self.services = services or ServiceDeployer(
            svc.dir, self.bootstrap_servers, topic=svc.topic, group=svc.group, client=spec.client, rate=svc.rate,
            run_id=svc.observations_run_id, stop_timeout=spec.timeouts.stop, tie_to_parent=tie_to_parent,
            commands={str(role): argv for role, argv in svc.command.items()}, env=svc.env, cwd=svc.cwd or None)

    @property
    def snapshot(self) -> ClientSnapshot:
        """The pre-rollout snapshot preflight took (RunStateError before)."""
        return cast(ClientSnapshot, self.state.snapshot)

    @property
    def topic(self) -> str:
        return self.spec.service.topic

    def write_report(self) -> Path:
        return write_report(self.state, self.audit, CLIENT_REPORT)

    def observe(self) -> TopicState:
        return self.admin.topic(self.topic)

    def partitions(self) -> list[PartitionView]:
        """The service topic's partitions (what the broker rollout's election helpers select from)."""
        return [PartitionView(self.topic, p, s.replicas, s.isr, s.leader, 1)
                for p, s in sorted(self.observe().partitions.items())]


def fleet(spec: ClientRolloutSpec, version: str, lane: str = "baseline") -> list[Instance]:
    """The instances of one lane: the baseline's as the spec counts them, the canary lane's one producer (if the
    service has producers) and one consumer (if it has consumers), named with the client marker."""
    svc = spec.service
    producers, consumers = (svc.producers, svc.consumers) if lane == "baseline" else (
        min(svc.producers, 1), min(svc.consumers, 1))

    def name(role: str, i: int) -> str:
        base = f"{svc.name}-{role}-{i}"
        return lanes.canary_client_id(base) if lane == "canary" else base
    return ([Instance(name("producer", i), "producer", lane, version) for i in range(producers)]  # type: ignore[arg-type]
            + [Instance(name("consumer", i), "consumer", lane, version, i, consumers)  # type: ignore[arg-type]
               for i in range(consumers)])
