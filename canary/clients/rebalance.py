"""Rebalance disruption of a consumer group, per lane, from the rebalance callbacks its instances recorded
(the KIP-848 migration canary, docs/migration-canary.md). Pure: no Kafka here, so the accounting and the
decision rule are unit-tested from recorded event lists.

An event is one rebalance callback of one instance **incarnation** (a restarted or re-configured instance is a new
incarnation with the same client id), or the moment it began to close. Times are seconds on one clock shared by
every instance of the run (the migration canary's instances run on its host and log wall-clock times).

What is counted, per incarnation, inside the window [start, end] and before the incarnation began to close (its own
close revokes everything on purpose and is not a disruption):

- **callbacks**: `assigned`, `revoked` and `lost` callbacks that carried at least one partition;
- **revoked**: partitions taken away (`revoked` and `lost`);
- **needless**: revoked partitions whose next owner was the same incarnation, with no other instance given them in
  between: the partition never moved, yet its processing stopped (KIP-848: "a consumer should not be impacted at all
  by a rebalance if its assignment is not changed"; the eager classic protocol revokes everything on every rebalance);
- **pause**: seconds with no partition after having had one (clipped to the window; an open pause ends at the window
  end or when the incarnation starts closing).

A lane's figures are totals divided by the lane's instance slots (its configured instance count), so three baseline
instances and one canary instance compare per instance.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Literal

from canary.judge import INCONCLUSIVE, PROMOTE, ROLLBACK, Brief, Decision
from canary.observations import LANES, Lane

EventKind = Literal["assigned", "revoked", "lost", "closing"]


@dataclass(frozen=True)
class RebalanceEvent:
    at: float                      # seconds on the run's monotonic clock
    instance: str                  # one incarnation, e.g. "orders-1#2"
    lane: Lane
    kind: EventKind
    partitions: tuple[int, ...] = ()

    def to_dict(self) -> dict:
        return {**asdict(self), "partitions": list(self.partitions)}


@dataclass
class InstanceDisruption:
    instance: str
    lane: Lane
    callbacks: int = 0
    revoked: int = 0
    needless: int = 0
    pause_s: float = 0.0
    pauses: int = 0


@dataclass
class LaneDisruption:
    lane: Lane
    slots: int
    instances: list[InstanceDisruption] = field(default_factory=list)

    def total(self, name: str) -> float:
        return sum(getattr(i, name) for i in self.instances)

    def per_instance(self, name: str) -> float:
        return self.total(name) / self.slots if self.slots else 0.0

    def to_dict(self) -> dict:
        return {"lane": self.lane, "slots": self.slots,
                "totals": {m: round(self.total(m), 3) for m in _COUNTED},
                "per_instance": {m: round(self.per_instance(m), 3) for m in _COUNTED},
                "instances": [asdict(i) | {"pause_s": round(i.pause_s, 3)} for i in self.instances]}


_COUNTED = ("callbacks", "revoked", "needless", "pause_s", "pauses")


def account(events: Iterable[RebalanceEvent], start: float, end: float, slots: dict[str, int]
            ) -> dict[Lane, LaneDisruption]:
    """Per lane disruption of the events inside [start, end] (events before `start` only build the state)."""
    ordered = sorted(events, key=lambda e: e.at)
    held: dict[str, set[int]] = defaultdict(set)
    closing: set[str] = set()
    had: set[str] = set()
    empty_since: dict[str, float] = {}
    stats: dict[str, InstanceDisruption] = {}

    def stat(e: RebalanceEvent) -> InstanceDisruption:
        if e.instance not in stats:
            stats[e.instance] = InstanceDisruption(e.instance, e.lane)
        return stats[e.instance]

    def end_pause(e: RebalanceEvent, at: float) -> None:
        since = empty_since.pop(e.instance, None)
        if since is not None and min(at, end) > max(since, start):
            stat(e).pause_s += min(at, end) - max(since, start)
            stat(e).pauses += 1

    for i, e in enumerate(ordered):
        if e.instance in closing:
            continue
        counted = start <= e.at <= end
        if counted:
            stat(e)  # every incarnation seen in the window is listed, disturbed or not
        if e.kind == "closing":
            closing.add(e.instance)
            end_pause(e, e.at)
            continue
        parts = set(e.partitions)
        if counted and parts:
            stat(e).callbacks += 1
        if e.kind == "assigned":
            held[e.instance] |= parts
            if held[e.instance]:
                end_pause(e, e.at)
                had.add(e.instance)
            continue
        taken = parts & held[e.instance] if e.kind == "revoked" else parts
        held[e.instance] -= parts
        if counted:
            stat(e).revoked += len(taken)
            stat(e).needless += sum(1 for p in taken if _next_owner(ordered, i, p) == e.instance)
        if e.instance in had and not held[e.instance] and e.instance not in empty_since:
            empty_since[e.instance] = e.at
    for instance, since in list(empty_since.items()):
        if instance in stats and end > max(since, start):
            stats[instance].pause_s += end - max(since, start)
            stats[instance].pauses += 1
    lanes = {lane: LaneDisruption(lane, slots.get(lane, 0)) for lane in LANES}
    for s in sorted(stats.values(), key=lambda s: s.instance):
        lanes[s.lane].instances.append(s)
    return lanes


def _next_owner(ordered: list[RebalanceEvent], after: int, partition: int) -> str | None:
    """The incarnation the partition is next assigned to after event `after`, or None if no one took it."""
    for e in ordered[after + 1:]:
        if e.kind == "assigned" and partition in e.partitions:
            return e.instance
    return None


@dataclass(frozen=True)
class DisruptionRule:
    """One compared figure (per instance): the canary regresses when it exceeds the baseline by more than both
    floors (absolute, in the figure's unit, and relative)."""

    metric: str
    abs_floor: float
    rel_floor: float = 0.5
    unit: str = ""


DISRUPTION_RULES: tuple[DisruptionRule, ...] = (
    DisruptionRule("revoked", 1.0, unit="partitions"),
    DisruptionRule("needless", 1.0, unit="partitions"),
    DisruptionRule("pause_s", 1.0, unit="s"),
    DisruptionRule("callbacks", 2.0, unit="callbacks"),
)


def compare(lanes: Mapping[Lane, LaneDisruption], disturbances: int, min_disturbances: int = 1,
            rules: tuple[DisruptionRule, ...] = DISRUPTION_RULES) -> dict:
    """The lanes' disruption compared, figure by figure: FAIL when canary - baseline > abs_floor and
    canary > baseline x (1 + rel_floor). Fewer than `min_disturbances` completed disturbances, a window in which
    the group never rebalanced, or a lane without instances is INCONCLUSIVE, never a silent pass.

    Returns {"verdict", "reason", "metrics": [...], "lanes": {...}} (JSON-able)."""
    canary, baseline = lanes["canary"], lanes["baseline"]
    rebalanced = sum(lane.total("callbacks") for lane in lanes.values())
    short = None
    if not canary.slots or not baseline.slots:
        short = "a lane has no instance"
    elif disturbances < min_disturbances:
        short = f"{disturbances} disturbance(s) completed in the window, {min_disturbances} needed"
    elif rebalanced == 0:
        short = "the group did not rebalance in the window (no callback in either lane)"
    metrics = []
    for rule in rules:
        c, b = canary.per_instance(rule.metric), baseline.per_instance(rule.metric)
        entry = {"name": f"{rule.metric}_per_instance", "canary": round(c, 3), "baseline": round(b, 3),
                 "effect": round(c - b, 3), "abs_floor": rule.abs_floor, "rel_floor": rule.rel_floor,
                 "unit": rule.unit}
        text = f"canary {c:.3g} vs baseline {b:.3g} {rule.unit} per instance"
        if short:
            decision, why = Decision.INSUFFICIENT_DATA, f"{short}; {text} not compared"
        elif c - b > rule.abs_floor and c > b * (1 + rule.rel_floor):
            decision, why = Decision.FAIL, f"{text}: beyond +{rule.abs_floor:g} {rule.unit} and +{rule.rel_floor:.0%}"
        else:
            decision, why = Decision.PASS, f"{text}: within +{rule.abs_floor:g} {rule.unit} or +{rule.rel_floor:.0%}"
        metrics.append(entry | {"decision": decision.value, "reason": why})  # JSON as the judge's metrics are
    failed = [m for m in metrics if m["decision"] == Decision.FAIL]
    if short:
        verdict, reason = INCONCLUSIVE, f"rebalance disruption not compared: {short}"
    elif failed:
        verdict = ROLLBACK
        reason = "more rebalance disruption in the canary lane: " + "; ".join(f"{m['name']}: {m['reason']}"
                                                                          for m in failed)
    else:
        verdict = PROMOTE
        reason = (f"no more disruption in the canary lane than in the baseline beyond the floors "
                  f"({disturbances} disturbance(s), {int(rebalanced)} callbacks)")
    return {"verdict": verdict, "reason": reason, "disturbances": disturbances, "metrics": metrics,
            "lanes": {name: lane.to_dict() for name, lane in lanes.items()}}


def combine(disruption: dict, judged: dict) -> tuple[str, str]:
    """One verdict from the disruption comparison and the judge's lag/processing verdict: any ROLLBACK rolls back,
    else any INCONCLUSIVE is inconclusive, else PROMOTE."""
    briefs = [("rebalance disruption", Brief.of(disruption)), ("lag and processing", Brief.of(judged))]
    for wanted in (ROLLBACK, INCONCLUSIVE):
        hit = [f"{name}: {brief.reason}" for name, brief in briefs if brief.verdict == wanted]
        if hit:
            return wanted, "; ".join(hit)
    return PROMOTE, "; ".join(f"{name}: {brief.reason}" for name, brief in briefs)
