"""A run stopped by a mistake in its spec exits 2 (fix the spec, run again), one stopped by the cluster's state or
the infrastructure exits 4 (UNFINISHED); both say where the run stopped."""

from types import SimpleNamespace

from canary.rollout.core import RolloutError, SpecMismatch
from canary.rollout.core.cli import RunUnfinished

RUN = SimpleNamespace(run_id="r1", state=SimpleNamespace(status="preflight"))


def test_a_spec_mistake_exits_2_and_a_cluster_state_4():
    mistake = RunUnfinished.of(RUN, SpecMismatch("canary.brokers: [3000] are not brokers of this cluster"))
    state = RunUnfinished.of(RUN, RolloutError("brokers [2] are not running; start them before a rollout"))
    assert (mistake.exit_code, state.exit_code) == (2, 4)
    assert str(mistake) == ("canary.brokers: [3000] are not brokers of this cluster (rollout r1 stopped unfinished "
                            "at 'preflight')")
