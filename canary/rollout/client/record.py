"""What a client rollout keeps in its run.json beyond every kind's record: the pre-rollout snapshot of the service
topic (its replica lists, the lane plan, the canary brokers) and of the fleet's instances (`ClientSnapshot`)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from canary.rollout.core.record import RunKind, RunRecord, Snapshot


class InstanceSnapshot(BaseModel):
    """One service instance as the service deployer described it (canary.clients.deployer.InstanceStatus)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    role: str
    lane: str
    version: str
    instance: int = 0
    instances: int = 1
    group_protocol: str = ""
    assignor: str = ""
    running: bool = False
    pid: int | None = None


class ClientSnapshot(Snapshot):
    """The service topic, the canary brokers, each partition's replica list before the lane opened and the lane plan
    (the replica lists that make the canary partitions), by partition number as a string (JSON's keys); the fleet's
    instances."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    topic: str
    canary_brokers: list[int]
    replicas: dict[str, list[int]]
    lane: dict[str, list[int]]
    instances: list[InstanceSnapshot] = []

    def original_replicas(self) -> dict[int, list[int]]:
        return {int(p): reps for p, reps in self.replicas.items()}

    def lane_plan(self) -> dict[int, list[int]]:
        return {int(p): reps for p, reps in self.lane.items()}


class ClientRunRecord(RunRecord):
    """A client rollout's run.json: every kind's record with the client's snapshot."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, populate_by_name=True)

    kind: Literal[RunKind.CLIENT] = RunKind.CLIENT
    before: ClientSnapshot | None = None
