"""The client rollout as a kind of the rollout core: its steps in order, promote, rollback and verify."""

from __future__ import annotations

from pathlib import Path

from canary.clients.deployer import ServiceDeployer
from canary.rollout.client import lane, preflight, promote, verify, window
from canary.rollout.client.rollout import ClientRollout
from canary.rollout.client.spec import ClientRolloutSpec, load_client_spec
from canary.rollout.core import RolloutKind, Step
from canary.rollout.deployers.base import Deployer


def _open(spec: ClientRolloutSpec, run_dir: str | Path | None = None, deployer: Deployer | None = None,
          services: ServiceDeployer | None = None, tie_to_parent: bool = False) -> ClientRollout:
    return ClientRollout(spec, run_dir, deployer, services, tie_to_parent)


CLIENT = RolloutKind(
    name="client", command="client-rollout",
    steps=(Step("preflight", preflight.preflight,
                "check cluster, topic, canary broker, baseline fleet; record the state; lock"),
           Step("open-lane", lane.open_lane, "make the planned partitions canary partitions (reorder replicas, elect)",
                after_change=True),
           Step("deploy-canary", preflight.deploy_canary, "start the canary instances on the target version",
                after_change=True),
           Step("window", window.window, "let traffic flow for the window, with interim looks (fail fast)",
                after_change=True),
           Step("judge", window.judge_window, "the verdict of the window (exit 0/1/3 by verdict)", after_change=True,
                decides=True)),
    promote=Step("promote", promote.promote,
                 "baseline instances to the target one at a time, close the lane, stop canaries"),
    rollback=Step("rollback", promote.rollback, "stop canary producers, drain, close the lane, stop canary consumers",
                  after_rollback=True),
    verify=Step("verify", verify.verify, "check the promised state, release the lock", after_rollback=True),
    load_spec=load_client_spec, open_run=_open)
