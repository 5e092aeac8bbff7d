"""The batches a fleet is rolled in: brokers that may restart together because the safe-roll guard, generalised to a
set (canary.rollout.guard.decide), proves every partition stays at min.insync.replicas plus a headroom while they
are all away. Pure: planned from the cluster's real placement before anything restarts, and shown.

Racks are the natural grouping: with rack-aware placement a partition has at most one replica per rack, so the
brokers of one rack can often go together, and brokers of two racks never share a batch. Each batch starts only once
every ISR is whole again after the one before (the roll waits for it), so batches are planned against whole ISRs;
what is not whole now is named in the plan's notes, and the guard still decides at each batch's start.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field, replace

from canary import lanes
from canary.rollout.guard import PartitionView, decide


@dataclass(frozen=True)
class Batch:
    brokers: tuple[int, ...]
    rack: str | None

    def to_dict(self) -> dict:
        return {"brokers": list(self.brokers), "rack": self.rack}


@dataclass
class BatchPlan:
    batches: list[Batch]
    max_batch: int
    headroom: int
    notes: list[str] = field(default_factory=list)  # what the plan does about a broker down, a partition short, …

    def then(self, other: BatchPlan) -> BatchPlan:
        """This plan's batches, then `other`'s (the baseline brokers, then the canaries)."""
        return BatchPlan(self.batches + other.batches, self.max_batch, self.headroom,
                         self.notes + [n for n in other.notes if n not in self.notes])

    def lines(self) -> list[str]:
        """The plan as a person reads it before anything restarts."""
        shown = [f"{len(self.batches)} batch(es) of at most {self.max_batch} broker(s), headroom {self.headroom} "
                 f"above min.insync.replicas:"]
        shown += [f"  {i}. brokers {list(b.brokers)}" + (f" (rack {b.rack})" if b.rack else "")
                  for i, b in enumerate(self.batches, 1)]
        return shown + [f"  note: {n}" for n in self.notes]

    def to_dict(self) -> dict:
        return {"batches": [b.to_dict() for b in self.batches], "max_batch": self.max_batch,
                "headroom": self.headroom, "notes": self.notes}


def plan_batches(order: list[int], racks: Mapping[int, str | None], partitions: list[PartitionView],
                 max_batch: int = 1, headroom: int = 0, down: Collection[int] = (),
                 registered: Collection[int] | None = None) -> BatchPlan:
    """The batches `order`'s brokers restart in: a broker that is down first and alone (starting it takes nothing
    from any ISR), then per rack (in the order its first broker comes in `order`) as many brokers together, up to
    `max_batch`, as the guard allows with `headroom` on whole ISRs. `racks`: each broker's rack as deployed (the
    canary marker is not a rack); `registered`: the brokers the cluster's metadata shows (a running broker missing
    from it is starting, perhaps recovering its logs)."""
    if max_batch < 1:
        raise ValueError(f"max_batch must be at least 1, not {max_batch}")
    notes = _notes(order, partitions, down, registered)
    first = [b for b in order if b in down]
    batches = [Batch((b,), _rack(racks, b)) for b in first]
    whole = [replace(p, isr=p.replicas) for p in partitions]
    by_rack: dict[str | None, list[int]] = {}
    for b in order:
        if b not in down:
            by_rack.setdefault(_rack(racks, b), []).append(b)
    for rack, todo in by_rack.items():
        while todo:
            batch = [todo.pop(0)]
            for b in list(todo):
                if len(batch) < max_batch and decide([*batch, b], whole, headroom=headroom).allowed:
                    batch.append(b)
                    todo.remove(b)
            batches.append(Batch(tuple(batch), rack))
    return BatchPlan(batches, max_batch, headroom, notes)


def serial_plan(order: list[int], racks: Mapping[int, str | None], partitions: list[PartitionView],
                headroom: int = 0, down: Collection[int] = (), registered: Collection[int] | None = None) -> BatchPlan:
    """One broker at a time, in `order` (promote's serial roll) but a broker that is down first, with the same notes
    as plan_batches'."""
    first = [b for b in order if b in down] + [b for b in order if b not in down]
    return BatchPlan([Batch((b,), _rack(racks, b)) for b in first], 1, headroom,
                     _notes(order, partitions, down, registered))


def _rack(racks: Mapping[int, str | None], broker: int) -> str | None:
    return lanes.real_rack(racks.get(broker))


def _notes(order: list[int], partitions: list[PartitionView], down: Collection[int],
           registered: Collection[int] | None) -> list[str]:
    notes = [f"broker {b} is down: started first, alone (starting it takes nothing from any ISR)"
             for b in order if b in down]
    if registered is not None:
        notes += [f"broker {b} runs but is not registered (starting, or recovering its logs): its batch waits for it, "
                  f"with progress" for b in order if b not in down and b not in registered]
    hosted = set(order)

    def named(names: list[str]) -> str:
        return f"{', '.join(names[:5])}{', …' if len(names) > 5 else ''}"
    below = [p.name for p in partitions if hosted & set(p.replicas) and len(p.isr) < min(p.min_isr, len(p.replicas))]
    if below:
        notes.append(f"{len(below)} partition(s) already below min.insync.replicas ({named(below)}): acks=all writes "
                     f"to them fail now; no broker they live on restarts until their ISR is back at min ISR")
    short = [p.name for p in partitions if hosted & set(p.replicas)
             and min(p.min_isr, len(p.replicas)) <= len(p.isr) < len(p.replicas)]
    if short:
        notes.append(f"{len(short)} partition(s) not fully replicated now ({named(short)}): a batch hosting one "
                     f"waits until the guard allows it")
    never = [p.name for p in partitions if hosted & set(p.replicas) and p.min_isr >= len(p.replicas)]
    if never:
        notes.append(f"{len(never)} partition(s) with min.insync.replicas ≥ replication factor "
                     f"({named(never)}): unavailable for acks=all during any restart of their brokers, "
                     f"whatever the batches")
    return notes
