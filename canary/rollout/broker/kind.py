"""The broker rollout as a kind of the rollout core: its steps in order, promote, rollback and verify."""

from __future__ import annotations

from pathlib import Path

from canary.rollout.broker import deploy, desired, finalize, preflight, promote, rollback, verdict, verify, window
from canary.rollout.broker.rollout import Rollout
from canary.rollout.broker.spec import BrokerRolloutSpec, load_spec
from canary.rollout.core import RolloutKind, Step
from canary.rollout.deployers.base import Deployer


def _gate(run: Rollout) -> dict:
    """probe-window then judge: the verdict of this rollout."""
    PROBE_WINDOW(run)
    return JUDGE(run)


def _open(spec: BrokerRolloutSpec, run_dir: str | Path | None = None, deployer: Deployer | None = None) -> Rollout:
    return Rollout(spec, run_dir, deployer)


PREFLIGHT = Step("preflight", preflight.preflight,
                 "check health, features, lock, baseline probe; record the pre-rollout state")
DEPLOY_CANARY = Step("deploy-canary", deploy.deploy_canary,
                     "roll the canary brokers to the change, one at a time, under the guard", after_change=True)
WARM_UP = Step("warm-up", deploy.warm_up, "wait until every canary broker is back in the ISR of its partitions",
               after_change=True)
LEAD = Step("lead", deploy.lead, "move leadership of canary partitions to the canary brokers", after_change=True)
PROBE_WINDOW = Step("probe-window", window.probe_window, "probe for the window with interim looks (fail fast)",
                    after_change=True)
JUDGE = Step("judge", verdict.judge_window,
             "the final analysis of the window and its verdict (exit 0/1/3 by verdict)", after_change=True,
             decides=True)
GATE = Step("gate", _gate, "probe-window then judge (exit 0/1/3 by verdict)", decides=True)
PROMOTE = Step("promote", promote.promote, "roll the rest of the fleet and the controllers, probe")
FINALIZE = Step("finalize", finalize.finalize_fleet,
                "after promote.bake, a clean look, then raise the feature levels (irreversible)")
ROLLBACK = Step("rollback", rollback.rollback, "bring every changed broker back to the pre-rollout state",
                after_rollback=True)
VERIFY = Step("verify", verify.verify, "check the promised state, probe, release the lock", after_rollback=True)

BROKER = RolloutKind(name="broker", command="rollout",
                     steps=(PREFLIGHT, DEPLOY_CANARY, WARM_UP, LEAD, PROBE_WINDOW, JUDGE),
                     promote=PROMOTE, rollback=ROLLBACK, verify=VERIFY, load_spec=load_spec, open_run=_open,
                     extra_steps=(GATE, FINALIZE), left_behind=desired.not_back)
