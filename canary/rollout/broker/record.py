"""What a broker rollout keeps in its run.json beyond every kind's record: the pre-rollout snapshot of each broker,
controller, finalized feature level and partition leader (`BrokerSnapshot`), the window's probe, brokers' readings,
load and the client traffic it judged (`BrokerWindow`), the control brokers, the partitions a promotion drained,
the load preflight sized, and where a promotion stands (`Promotion`: whether a person approved it, which waves' looks
passed), so a promotion cut off midway resumes from the record, not from the audit log."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, model_serializer

from canary.rollout.core.record import RunKind, RunRecord, Snapshot, Window


class _Part(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class BrokerNode(_Part):
    """One broker as the deployer described it before the change (canary.rollout.deployers.base.BrokerInfo)."""

    id: int
    version: str
    config: dict[str, str] = {}
    rack: str | None = None
    client_delay_ms: float = 0.0


class ControllerNode(_Part):
    id: int
    version: str


class PartitionLeaders(_Part):
    leader: int
    preferred: int


class BrokerSnapshot(Snapshot):
    """Each broker's version, config overrides, rack and injected delay; each controller's version; the finalized
    feature levels; each partition's leader and preferred leader (by `topic-partition`). Node ids are strings, as
    JSON keeps them: `broker(id)` and `controller(id)` take the id."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    brokers: dict[str, BrokerNode] = {}
    controllers: dict[str, ControllerNode] = {}
    features: dict[str, int] = {}
    leaders: dict[str, PartitionLeaders] = {}

    def broker(self, broker_id: int) -> BrokerNode:
        return self.brokers[str(broker_id)]

    def controller(self, node_id: int) -> ControllerNode:
        return self.controllers[str(node_id)]

    def leader_map(self) -> dict[str, dict[str, int]]:
        """The leaders as canary.rollout.leaders.leaders gives them now (to compare the two)."""
        return {name: p.model_dump() for name, p in self.leaders.items()}


class LaneCounts(_Part):
    """The probe's count of one lane's messages over the window."""

    sent: int = 0
    acked: int = 0
    lost: int = 0
    produce_errors: int = 0


class TrafficJudged(_Part):
    """The client traffic a window judged (canary.rollout.broker.traffic.share and window_traffic): the canary
    brokers' mean of each measure and the median reference broker's, each canary's share per measure served,
    whether the traffic was representative and the canary's share fair, why; the leadership weights and the produce
    requests' fair range when shares were weighed; the load and probe rates beside it; the catch-up reads."""

    canary: dict[str, dict[str, float]] = {}
    baseline: dict[str, float] = {}
    share: dict[str, dict[str, float]] = {}
    representative: bool = False
    fair: bool = False
    reason: str = ""
    leads: dict[str, float] | None = None
    fair_requests: dict[str, list[float]] | None = None
    load_records_per_s_per_partition: float | None = None
    probe_messages_per_s_per_partition: float | None = None
    catch_up_reads: dict[str, Any] | None = None

    @model_serializer(mode="wrap")
    def _without_absent(self, handler: Any) -> dict[str, Any]:
        return {key: value for key, value in handler(self).items() if value is not None}

    def to_dict(self) -> dict[str, Any]:
        """The JSON form a verdict keeps (canary.rollout.core.record.Verdict.traffic)."""
        return self.model_dump(mode="json")


class BrokerWindow(Window):
    """A broker rollout's window: its probe (run id, observations file relative to the run, counts per lane), the
    disturbances seen, the brokers' readings, the load, and the client traffic judged (canary.rollout.broker.traffic:
    the canary's and the median reference broker's, each canary's share, whether representative and fair, why)."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)
    DETAILS: ClassVar[frozenset[str]] = frozenset({"probe_run_id", "observations", "disturbed", "probe",
                                                   "broker_readings", "load", "traffic"})

    probe_run_id: str | None = None
    observations: str | None = None
    disturbed: list[str] | None = None
    probe: dict[str, LaneCounts] | None = None
    broker_readings: dict[str, Any] | None = None
    load: dict[str, Any] | None = None
    traffic: TrafficJudged | None = None

    def traffic_dict(self) -> dict[str, Any] | None:
        return self.traffic.to_dict() if self.traffic is not None else None

    def probe_counts(self) -> dict[str, dict[str, int]] | None:
        """The per-lane counts in their JSON form (what a verdict keeps)."""
        return {lane: c.model_dump() for lane, c in self.probe.items()} if self.probe is not None else None


class Promotion(_Part):
    """Where a promotion stands: whether a person approved it (an INCONCLUSIVE verdict's promotion), and the waves
    whose look passed (not looked at again when the promotion resumes)."""

    approved: bool = False
    looked: tuple[int, ...] = ()

    def passed(self, wave: int) -> Promotion:
        return self if wave in self.looked else self.model_copy(update={"looked": (*self.looked, wave)})


class BrokerRunRecord(RunRecord):
    """A broker rollout's run.json: every kind's record, with the broker's snapshot and window, the control brokers
    preflight chose and those the deploy step restarted, the replica order of the partitions a promotion drained
    (until it gives them back), the load preflight sized, and where the promotion stands."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, populate_by_name=True)

    kind: Literal[RunKind.BROKER] = RunKind.BROKER
    before: BrokerSnapshot | None = None
    window: BrokerWindow | None = None
    control_brokers: list[int] | None = None
    control_restarted: list[int] = []
    drained: dict[str, list[int]] | None = None
    load_sizing: dict[str, Any] | None = None
    promotion: Promotion | None = None
