"""One operator per step of the client rollout (a producer/consumer service's new version in a canary lane,
canary.rollout.client). They are the broker rollout's step operators pointed at the client rollout kind: each
builds `CLIENT.open(spec, $KAFKA_CANARY_RUNS/<run id>)` from the DAG run's params and the cluster connection, runs
its step and returns the step's JSON result. Steps converge, so a retry is safe."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafka_canary_provider.operators.rollout import (
    JudgeOperator,
    PromoteOperator,
    RolloutReportOperator,
    RolloutStepOperator,
)
from kafka_canary_provider.runs import client_spec_from_params

if TYPE_CHECKING:
    from canary.rollout.core import RolloutKind



class ClientStep:
    """Mixed into a step operator: the client rollout's steps and run, instead of the broker rollout's."""

    ui_color = "#e6f4ea"

    def kind(self) -> RolloutKind:
        from canary.rollout.client import CLIENT

        return CLIENT

    def spec_source(self, params: dict, cluster: dict, run_id: str) -> dict:
        return client_spec_from_params(params, cluster, run_id)


class ClientPreflightOperator(ClientStep, RolloutStepOperator):
    """Cluster, topic, canary broker, the baseline fleet on the current version; records the state; takes the
    cluster lock. Changes nothing."""

    step = "preflight"


class OpenLaneOperator(ClientStep, RolloutStepOperator):
    """Makes the planned partitions canary partitions: a canary broker first in their replica lists (no data
    moves), then a preferred leader election."""

    step = "open-lane"


class ClientDeployCanaryOperator(ClientStep, RolloutStepOperator):
    """Starts the canary instances (the canary marker in their client ids) on the target version."""

    step = "deploy-canary"


class ClientWindowOperator(ClientStep, RolloutStepOperator):
    """Lets the service's traffic flow for the window, with interim looks that can stop it early (fail fast)."""

    step = "window"


class ClientJudgeOperator(ClientStep, JudgeOperator):
    """The window's verdict (the fail-fast one, else the analysis); a failure after the first change is ROLLBACK."""


class ClientPromoteOperator(ClientStep, PromoteOperator):
    """Baseline instances to the target version one at a time, then the lane closes, then the canary instances
    stop; an INCONCLUSIVE verdict only with a person's approval."""


class ClientRollbackOperator(ClientStep, RolloutStepOperator):
    """Canary producers stop first, canary consumers drain the canary partitions, the lane closes (the baseline
    takes the partitions over at the committed offsets), the canary consumers stop."""

    step = "rollback"


class ClientVerifyOperator(ClientStep, RolloutStepOperator):
    """Every instance on its promised version and running, no canary partition left, the replica order as
    before; releases the lock."""

    step = "verify"


class ClientReportOperator(ClientStep, RolloutReportOperator):
    """The run's report and outcome; fails the DAG run when the rollout did not finish verified."""
