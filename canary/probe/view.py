"""What the probe knows of the cluster between metadata reads (leaders, lanes, addresses), how it keeps its topic,
and the summary of a probe run."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from canary.errors import CanaryError
from canary.kafka.admin import TopicAdmin
from canary.kafka.health import metadata_and_brokers
from canary.lanes import broker_lane
from canary.probe.topic import ReconcileResult, TopicSpec, plan, reconcile


@dataclass
class ProbeSummary:
    """JSON-able result of one probe run."""
    run_id: str
    producer_id: str
    topic: str
    seconds: float
    lanes: dict[str, dict]
    partitions: dict[int, dict]
    foreign_records: int
    malformed_records: int
    unresolved: dict[str, int]
    observations: dict[str, int]
    reconcile: dict | None
    connection_checks: dict[int, dict] = field(default_factory=dict)
    broker_readings: dict | None = None
    reached: bool = True

    @property
    def acked(self) -> int:
        return sum(lane["acked"] for lane in self.lanes.values())

    def to_dict(self) -> dict:
        return asdict(self)


class ClusterView:
    """Leaders and broker lanes as last seen in the metadata (or, with `canary_brokers`, those brokers the canary
    lane whatever their marker); read on every send."""

    def __init__(self, canary_brokers: tuple[int, ...] | None = None) -> None:
        self.leaders: dict[int, int] = {}
        self.lanes: dict[int, str] = {}
        self.addresses: dict[int, str] = {}
        self.canary_brokers = None if canary_brokers is None else frozenset(canary_brokers)

    def lane_of(self, broker: int | None) -> str:
        return self.lanes.get(broker, "baseline") if broker is not None else "baseline"

    def refresh(self, admin: TopicAdmin, topic_name: str) -> None:
        metadata, nodes = metadata_and_brokers(admin.admin, 10)
        lanes = {n.id: broker_lane(n.rack) if self.canary_brokers is None else
                 "canary" if n.id in self.canary_brokers else "baseline" for n in nodes}
        addresses = {n.id: f"{n.host}:{n.port}" for n in nodes}
        topic = metadata.topics.get(topic_name)
        # Per partition even when the topic reports an error (e.g. one partition without a leader).
        leaders = {p.id: p.leader for p in topic.partitions.values()} if topic else {}
        # Brokers that leave the metadata (down, fenced) stay known: their connection checks go on failing.
        self.lanes = {**self.lanes, **lanes}
        self.addresses = {**self.addresses, **addresses}
        self.leaders = leaders


def reconciled(admin: TopicAdmin, spec: TopicSpec, change: bool, previous: ReconcileResult | None) -> ReconcileResult:
    """The probe topic reconciled (`change`), or read only: the partitions the rules say are owned, nothing changed."""
    if change:
        return reconcile(admin, spec, wait=10.0, previous_owners=previous.owners if previous else None)
    state = admin.observe(spec.name)
    if not state.exists:
        raise CanaryError(f"topic {spec.name} does not exist and reconciling is off")
    todo = plan(spec, state)
    owners = {b: p for b, p in todo.owners.items() if p in state.partitions}
    return ReconcileResult(spec.name, False, False, [], {}, [], {}, owners, todo.orphans, todo.replication_factor)
