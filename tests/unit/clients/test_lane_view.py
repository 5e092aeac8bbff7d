from concurrent.futures import Future
from types import SimpleNamespace as NS

from confluent_kafka import KafkaError, KafkaException

from canary.clients import LaneView


class FakeAdmin:
    """list_topics answers from `leaders` (topic -> partition -> leader, None: unknown topic); describe_cluster from
    `racks`, or fails while `controller_down`."""

    def __init__(self, leaders, racks):
        self.leaders, self.racks = leaders, racks
        self.controller_down = False
        self.asked: list[str] = []

    def list_topics(self, topic=None, timeout=-1):
        self.asked.append(topic)
        found = self.leaders.get(topic)
        if found is None:
            meta = NS(error=KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART), partitions={})
        else:
            meta = NS(error=None, partitions={p: NS(id=p, leader=b) for p, b in found.items()})
        return NS(topics={topic: meta})

    def describe_cluster(self, request_timeout=None):
        future = Future()
        if self.controller_down:
            future.set_exception(KafkaException(KafkaError(KafkaError._TIMED_OUT, "Timed out waiting for controller")))
        else:
            future.set_result(NS(nodes=[NS(id=b, rack=r) for b, r in self.racks.items()]))
        return future


def test_lanes_follow_leaders_and_racks_and_the_version_moves_only_on_change():
    admin = FakeAdmin({"orders": {0: 1, 1: 3, 2: -1}}, {1: None, 3: "canary-broker"})
    with LaneView({}, ["orders"], interval=3600, admin=admin) as view:
        lanes = view.get("orders")
        assert (lanes.partitions("canary"), lanes.partitions("baseline"), lanes.lane_of(2)) == ((1,), (0,), None)
        version = view.version
        assert view.refresh() and view.version == version
        admin.leaders["orders"] = {0: 1, 1: 1, 2: 1}  # broker 3 gave up leadership
        assert view.refresh() and view.version == version + 1
        assert view.get("orders").partitions("canary") == ()


def test_leaders_are_followed_while_racks_cannot_be_read_and_unknown_brokers_are_in_no_lane():
    admin = FakeAdmin({"orders": {0: 1, 1: 3}}, {1: None, 3: "canary-broker"})
    with LaneView({}, ["orders"], interval=3600, admin=admin) as view:
        admin.controller_down = True
        admin.leaders["orders"] = {0: 1, 1: 1}
        assert not view.refresh()  # racks not read, but the leadership change is published
        assert view.get("orders").partitions("baseline") == (0, 1) and view.errors == 1
        assert "Timed out waiting for controller" in view.last_error
        admin.leaders["orders"] = {0: 4, 1: 3}  # broker 4 is new: its rack is not known yet
        view.refresh()
        assert view.get("orders").lane_of(0) is None and view.get("orders").partitions("canary") == (1,)
        admin.controller_down = False
        admin.racks[4] = "canary-broker"
        assert view.refresh() and view.last_error is None
        assert view.get("orders").partitions("canary") == (0, 1)


def test_an_unknown_topic_reads_as_missing_and_is_followed():
    admin = FakeAdmin({}, {1: None})
    with LaneView({}, interval=3600, admin=admin) as view:
        assert not view.get("later").exists and view.topics == ["later"]
        admin.leaders["later"] = {0: 1}
        view.refresh()
        assert view.get("later").exists and view.get("later").partitions("baseline") == (0,)
