"""The rollout core: the step contract (`Step`), rollout kinds (`RolloutKind`), the run every kind has
(`RolloutRun`: spec, run state, audit log, cluster lock), the status that knows its outcome, and the engine that
runs a kind's steps to the end."""

from canary.rollout.core.engine import result, run_all
from canary.rollout.core.kind import RolloutKind
from canary.rollout.core.rollout import ClusterRun, RolloutRun
from canary.rollout.core.status import ERROR_EXIT, EXIT, Status
from canary.rollout.core.step import RolloutError, Step

__all__ = ["ERROR_EXIT", "EXIT", "ClusterRun", "RolloutError", "RolloutKind", "RolloutRun", "Status", "Step",
           "result", "run_all"]
