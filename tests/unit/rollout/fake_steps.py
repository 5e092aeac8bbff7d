"""A rollout kind whose steps are fakes: unit tests drive the engine and the kinds' rules without a cluster."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from canary.rollout.core import RolloutKind, Step


def with_fake_steps(kind: RolloutKind, fake: Callable[[str], Callable[..., Any]], **fields: Any) -> RolloutKind:
    """`kind` with every step's run (promote, rollback and verify too) replaced by `fake(step name)`; `fields`
    replace the kind's other fields."""

    def swapped(step: Step) -> Step:
        return dataclasses.replace(step, run=fake(step.name))
    return dataclasses.replace(kind, steps=tuple(swapped(s) for s in kind.steps), promote=swapped(kind.promote),
                               rollback=swapped(kind.rollback), verify=swapped(kind.verify), **fields)
