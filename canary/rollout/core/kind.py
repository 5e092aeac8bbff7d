"""A rollout kind: its steps in order up to the verdict, its promote, rollback and verify, and how its run is built
from a spec. The engine, the CLI and the Airflow operators take a kind and a step name; nothing looks a module
up by name."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from canary.rollout.core.rollout import RolloutRun
from canary.rollout.core.step import Step
from canary.storage import Store


@dataclass(frozen=True)
class RolloutKind:
    """name: "broker", "client", "migration". command: its CLI command (`kafka-canary <command> …`).
    steps: in order, up to and including the one that decides. extra_steps: CLI commands beyond them (e.g. `gate`).
    load_spec: (file path or mapping, environment) -> the kind's spec. open_run: (spec, run dir) -> its run.
    step_by_step: False when the steps share state held in this process (they run only through `run`).
    left_behind: (run) -> what is not back as before the rollout, one phrase per node, as the deployer describes it
    now: what a failed rollback's error names (None: the rollback's own error says all there is)."""

    name: str
    command: str
    steps: tuple[Step, ...]
    promote: Step
    rollback: Step
    verify: Step
    load_spec: Callable[[str | Path | dict, Mapping[str, str] | None], Any]
    open_run: Callable[..., RolloutRun]
    extra_steps: tuple[Step, ...] = ()
    step_by_step: bool = True
    left_behind: Callable[[Any], list[str]] | None = None

    def __post_init__(self) -> None:
        if not (self.rollback.after_rollback and self.verify.after_rollback):
            raise ValueError(f"the {self.name} rollout's rollback and verify steps must be after_rollback: they are "
                             f"what finishes a run that decided ROLLBACK")

    @property
    def all_steps(self) -> tuple[Step, ...]:
        return (*self.steps, *self.extra_steps, self.promote, self.rollback, self.verify)

    def step(self, name: str) -> Step:
        for step in self.all_steps:
            if step.name == name:
                return step
        raise KeyError(f"the {self.name} rollout has no step {name!r}; its steps: "
                       f"{', '.join(s.name for s in self.all_steps)}")

    @property
    def changing_steps(self) -> tuple[str, ...]:
        """The steps after the first change and before the verdict: a failure in one of them means ROLLBACK (what
        the step that decides records when it runs after them)."""
        return tuple(s.name for s in self.steps if s.after_change and not s.decides)

    def open(self, source: str | Path | dict, run_dir: str | Path | Store | None = None,
             environ: Mapping[str, str] | None = None, **options: Any) -> RolloutRun:
        """The run of the spec in `source` (a YAML/JSON file or a mapping), in `run_dir`."""
        return self.open_run(self.load_spec(source, environ), run_dir, **options)
