"""Gated waves of a promotion: the plan's batches (baseline brokers first, the canaries last) cut into waves, each
promoted whole, and between two waves a short look that puts the brokers promoted so far against those not promoted
yet, on the run's judge. A regression at a look stops the promotion before anything is finalized: the promoted
waves roll back. Pure planning here; the look and the roll are canary.rollout.broker.promote's."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from canary.rollout.broker.batches import Batch, BatchPlan

ALL = "all"
# A fleet smaller than this is promoted in one wave by default (`waves: auto`): a look would put one or two brokers
# against one or two, weak evidence for the minutes it costs.
AUTO_MIN_FLEET = 6
AUTO_WAVES = ("25%", "50%", ALL)


@dataclass(frozen=True)
class Wave:
    number: int                     # from 1
    batches: tuple[Batch, ...]

    @property
    def brokers(self) -> list[int]:
        return [b for batch in self.batches for b in batch.brokers]

    def to_dict(self) -> dict:
        return {"wave": self.number, "batches": [list(b.brokers) for b in self.batches]}


def wave_sizes(setting: str | Sequence[str], fleet: int) -> list[str]:
    """The waves' cumulative sizes the spec's `promote.waves` asks for on a fleet of `fleet` brokers: `auto` is
    AUTO_WAVES from AUTO_MIN_FLEET brokers on, else one wave."""
    if isinstance(setting, str):
        return list(AUTO_WAVES) if setting == "auto" and fleet >= AUTO_MIN_FLEET else [ALL]
    return list(setting)


def plan_waves(plan: BatchPlan, sizes: Sequence[str]) -> list[Wave]:
    """Cuts the plan's batches into waves: wave k ends with the first batch at which the brokers promoted so far reach
    sizes[k] (a percentage of the plan's brokers, or "all"); every wave holds at least one batch, a size reached
    already adds no wave, and the last wave takes whatever is left."""
    total = sum(len(b.brokers) for b in plan.batches)
    targets = [total if s == ALL else math.ceil(total * float(s.rstrip("%")) / 100) for s in sizes]
    waves: list[Wave] = []
    todo, done = list(plan.batches), 0
    for target in targets:
        if done >= target:
            continue
        batches: list[Batch] = []
        while todo and done < target:
            batches.append(todo.pop(0))
            done += len(batches[-1].brokers)
        waves.append(Wave(len(waves) + 1, tuple(batches)))
    if todo:  # sizes below 100 %: the rest is the last wave
        waves.append(Wave(len(waves) + 1, tuple(todo)))
    return waves


def wave_lines(waves: list[Wave], look_s: float, controlled: bool = False) -> list[str]:
    """The waves as the plan shows them before anything restarts (`controlled`: each look beside a control broker,
    canary.rollout.broker.wave_look)."""
    if len(waves) < 2:
        return ["one wave: every batch in turn, no look between"]
    looks = f"a look of {look_s:g} s after each wave but the last" if look_s else "no look between waves"
    if look_s and controlled:
        looks += ", against the next wave's first broker restarted unchanged just before"
    return [f"{len(waves)} waves ({looks}):"] + [f"  wave {w.number}: brokers {w.brokers}" for w in waves]
