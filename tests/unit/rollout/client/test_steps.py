"""The client rollout's cluster steps on a cluster in memory (tests/unit/rollout/fake_cluster.py): preflight's
refusals before any change, and the canary lane opened and closed by reordering replicas (no data moves) and
electing. The same steps run on real brokers and service instances in tests/integration/test_client_rollout.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from canary.clients.deployer import ServiceDeployer
from canary.lanes import canary_rack
from canary.rollout.client.lane import close_lane, open_lane
from canary.rollout.client.preflight import preflight
from canary.rollout.client.rollout import ClientRollout
from canary.rollout.client.spec import load_client_spec
from canary.rollout.core import RolloutError, RunStatus

from ..fake_cluster import FakeCluster, VirtualClock


@pytest.fixture(autouse=True)
def clock(monkeypatch) -> VirtualClock:
    return VirtualClock(monkeypatch)


@pytest.fixture
def cluster() -> FakeCluster:
    """Three brokers, broker 3 marked canary; `orders` with 4 partitions on all three, led by their first replica,
    none by the canary (no canary partition outside a client rollout)."""
    c = FakeCluster.of(topics={"orders": 4})
    c.brokers_[3] = c.brokers_[3].__class__(3, "3.9.2", {}, canary_rack(None), True)
    c.parts[("orders", 2)].replicas = [1, 3, 2]
    c.parts[("orders", 2)].leader = 1
    return c


class Services:
    """The service deployer: no instance runs (preflight's fleet check is the integration tests')."""

    def instances(self) -> list:
        return []

    def program_problem(self, wanted) -> None:
        return None


class Lock:
    def acquire(self, run_id: str, brokers: int) -> bool:
        return True


def run_on(cluster: FakeCluster, tmp_path: Path, services: object | None = None, **service) -> ClientRollout:
    spec = load_client_spec({"cluster": {"dir": str(tmp_path / "no-cluster")},
                             "service": {"name": "orders", "topic": "orders", "group": "billing",
                                         "dir": str(tmp_path / "fleet")} | service,
                             "change": {"from": "v1", "to": "v2"}, "lane": {"partitions": 1}, "run_id": "unit"})
    run = ClientRollout(spec, tmp_path / "run", deployer=cluster, admin=cluster,
                        services=services or Services())  # type: ignore[arg-type]
    run.lock = Lock()  # type: ignore[assignment]
    return run


def opened(cluster: FakeCluster, tmp_path: Path) -> ClientRollout:
    """A run whose preflight recorded the plan: partition 0 (replicas 1, 2, 3) gets broker 3 first."""
    run = run_on(cluster, tmp_path)
    before = {"topic": "orders", "canary_brokers": [3], "replicas": {str(p): list(s.replicas)
                                                  for p, s in run.observe().partitions.items()},
              "lane": {"0": [3, 2, 1]}}
    run.state.update(before=before, canary_brokers=[3], status=RunStatus.PREFLIGHT)
    run.step = "open-lane"
    open_lane(run)
    return run


@pytest.mark.parametrize("trouble, message", [
    (lambda c: c.parts.clear(), r"the service topic orders does not exist; create it"),
    (lambda c: c.moving.append(("orders", 2)), r"partitions \[2\] of orders are being reassigned"),
    (lambda c: setattr(c.parts[("orders", 2)], "leader", 3),
     r"orders already has canary partitions \[2\] \(led by canary broker\(s\) \[3\]\)"),
], ids=["no-topic", "reassigning", "canary-partition-left"])
def test_preflight_refuses_before_any_change(cluster, tmp_path, trouble, message):
    trouble(cluster)
    run = run_on(cluster, tmp_path)
    with pytest.raises(RolloutError, match=message):
        preflight(run)
    assert cluster.changes == [] and run.state.before is None


def test_preflight_refuses_a_service_command_whose_program_is_not_there(cluster, tmp_path):
    run = run_on(cluster, tmp_path, None, producers=0, command={"consumer": ["billing-{version}", "--lane", "{lane}"]})
    run.services = ServiceDeployer(tmp_path / "fleet", "127.0.0.1:9", topic="orders", group="billing",
                                   commands={"consumer": ["billing-{version}"]})
    with pytest.raises(RolloutError, match=r"service.command: the consumer command of v2 runs 'billing-v2', which is "
                                           r"not an executable file \(looked up on PATH\)"):
        preflight(run)
    assert cluster.changes == [] and run.state.before is None


def test_open_lane_puts_the_canary_first_and_elects_it_without_moving_data(cluster, tmp_path):
    run = opened(cluster, tmp_path)
    assert cluster.changes == [("reorder", "orders-0", [3, 2, 1]), ("elect", "orders-0", 3)]
    assert cluster.led_by(3) == ["orders-0"] and run.state.status is RunStatus.LANE_OPEN


def test_open_lane_run_again_changes_nothing(cluster, tmp_path):
    run = opened(cluster, tmp_path)
    open_lane(run)
    assert len(cluster.changes) == 2


def test_close_lane_restores_the_replica_order_and_the_leaders(cluster, tmp_path):
    run = opened(cluster, tmp_path)
    cluster.changes.clear()
    assert close_lane(run) == {"closed": [0]}
    assert cluster.changes == [("reorder", "orders-0", [1, 2, 3]), ("elect", "orders-0", 1)]
    assert cluster.led_by(3) == []


def test_a_lane_whose_canary_cannot_lead_fails_naming_it(cluster, tmp_path):
    run = run_on(cluster, tmp_path)
    run.state.update(before={"topic": "orders", "canary_brokers": [3], "replicas": {"0": [1, 2, 3]},
                             "lane": {"0": [3, 2, 1]}},
                     canary_brokers=[3], status=RunStatus.PREFLIGHT)
    cluster.parts[("orders", 0)].isr = [1, 2]  # the canary broker behind: not electable
    with pytest.raises(RolloutError, match=r"the canary lane did not open as planned: canary partitions are \[\], "
                                           r"planned \[0\] \(not led by their canary broker: \['orders-0'\]\)"):
        open_lane(run)
