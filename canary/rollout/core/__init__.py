"""The rollout core: the step contract (`Step`), rollout kinds (`RolloutKind`), the run every kind has
(`RolloutRun`: spec, run state, audit log, cluster lock), the run's typed record with the status that knows its
outcome (`RunRecord`, `RunStatus`: canary.rollout.core.record), and the engine that runs a kind's steps to the end."""

from canary.outcome import Outcome
from canary.rollout.core.engine import result, run_all
from canary.rollout.core.kind import RolloutKind
from canary.rollout.core.record import Look, RunRecord, RunStatus, RunSummary, StepRecord, Verdict, Window
from canary.rollout.core.rollout import ClusterRun, RolloutRun
from canary.rollout.core.step import RolloutError, SpecMismatch, Step

__all__ = ["ClusterRun", "Look", "Outcome", "RolloutError", "RolloutKind", "RolloutRun", "RunRecord", "RunStatus",
           "RunSummary", "SpecMismatch", "Step", "StepRecord", "Verdict", "Window", "result", "run_all"]
