from canary.kafka.admin import PartitionState, TopicState
from canary.probe.load import LOAD_TOPIC_SPEC
from canary.probe.topic import TopicSpec, plan, rack_interleaved

SPEC = TopicSpec("canary")


def _state_from(assignment, brokers, leaders=None, configs=None):
    rf = min(len(brokers), 3)
    parts = {p: PartitionState(tuple(r), (leaders or {}).get(p, r[0]), tuple(r)) for p, r in enumerate(assignment)}
    return TopicState(brokers=brokers, exists=True, partitions=parts,
                      configs=configs if configs is not None else SPEC.configs(rf))


def test_new_topic_one_partition_per_broker_led_by_it_rf3_min_isr2():
    todo = plan(SPEC, TopicState(brokers={1: None, 2: None, 3: None, 4: None, 5: None}, exists=False))
    assert [r[0] for r in todo.create] == [1, 2, 3, 4, 5]
    assert all(len(set(r)) == 3 for r in todo.create)
    assert todo.configs["min.insync.replicas"] == "2"
    # spread: every broker hosts replicas, none hosts all partitions
    counts = {b: sum(b in r for r in todo.create) for b in range(1, 6)}
    assert set(counts.values()) == {3}


def test_small_clusters_rf_and_min_isr():
    one = plan(SPEC, TopicState(brokers={1: None}, exists=False))
    assert one.create == [[1]] and one.configs["min.insync.replicas"] == "1"
    two = plan(SPEC, TopicState(brokers={1: None, 2: None}, exists=False))
    assert two.create == [[1, 2], [2, 1]] and two.configs["min.insync.replicas"] == "1"


def test_racks_interleaved():
    brokers = {1: "a", 2: "a", 3: "b", 4: "b", 5: "c", 6: "c"}
    assert rack_interleaved(brokers) == [1, 3, 5, 2, 4, 6]
    todo = plan(SPEC, TopicState(brokers=brokers, exists=False))
    for replicas in todo.create:
        assert len({brokers[b] for b in replicas}) == 3


def test_canary_marker_is_not_a_rack_of_its_own():
    brokers = {1: "a:canary-broker", 2: "a", 3: "b", 4: "b"}
    todo = plan(SPEC, TopicState(brokers=brokers, exists=False))
    for replicas in todo.create:
        assert {brokers[b].split(":")[0] for b in replicas} == {"a", "b"}


def test_nothing_to_change_plans_nothing():
    brokers = {1: None, 2: None, 3: None}
    created = plan(SPEC, TopicState(brokers=brokers, exists=False)).create
    todo = plan(SPEC, _state_from(created, brokers))
    assert not todo.changes_anything
    assert todo.owners == {1: 0, 2: 1, 3: 2} and todo.orphans == []


def test_scale_up_adds_partition_led_by_new_broker_without_touching_others():
    brokers = {1: None, 2: None, 3: None}
    created = plan(SPEC, TopicState(brokers=brokers, exists=False)).create
    todo = plan(SPEC, _state_from(created, brokers | {4: None}))
    assert todo.add_partitions and todo.add_partitions[0][0] == 4 and len(todo.add_partitions) == 1
    assert todo.reassign == {} and todo.elect == []
    assert todo.owners[4] == 3


def test_scale_down_leaves_orphan_moved_onto_live_brokers_then_scale_up_takes_it_over():
    brokers4 = {1: None, 2: None, 3: None, 4: None}
    created = plan(SPEC, TopicState(brokers=brokers4, exists=False)).create
    brokers3 = {1: None, 2: None, 3: None}
    todo = plan(SPEC, _state_from(created, brokers3, leaders={3: 1}))
    assert todo.orphans == [3]
    assert 3 not in todo.owners.values()
    moved = {p: r for p, r in todo.reassign.items()}
    assert all(4 not in r and len(r) == 3 for r in moved.values())
    assert 3 in moved  # the orphan's replica on the gone broker is replaced
    # the gone broker comes back as broker 5: it takes the orphan over
    after = [moved.get(p, r) for p, r in enumerate(created)]
    again = plan(SPEC, _state_from(after, brokers3 | {5: None}, leaders={3: 1}))
    assert again.owners[5] == 3 and again.add_partitions == []
    assert again.reassign[3][0] == 5


def test_leader_drift_is_put_back_by_preferred_election_only():
    brokers = {1: None, 2: None, 3: None}
    created = plan(SPEC, TopicState(brokers=brokers, exists=False)).create
    todo = plan(SPEC, _state_from(created, brokers, leaders={0: 2, 2: 1}))
    assert todo.elect == [0, 2] and todo.reassign == {} and todo.add_partitions == []


def test_config_drift_sets_only_the_drifted_key():
    brokers = {1: None, 2: None, 3: None}
    created = plan(SPEC, TopicState(brokers=brokers, exists=False)).create
    configs = SPEC.configs(3) | {"min.insync.replicas": "1"}
    todo = plan(SPEC, _state_from(created, brokers, configs=configs))
    assert todo.configs == {"min.insync.replicas": "2"}


def test_partition_in_reassignment_is_left_alone():
    brokers = {1: None, 2: None, 3: None}
    state = TopicState(brokers=brokers, exists=True,
                       partitions={0: PartitionState((1, 2), 1, (1, 2)), 1: PartitionState((2, 3, 1), 2, (2, 3, 1)),
                                   2: PartitionState((3, 1, 2), 3, (3, 1, 2))},
                       configs=SPEC.configs(3), reassigning=frozenset({0}))
    assert not plan(SPEC, state).changes_anything


def test_a_restarting_broker_is_kept_within_the_grace_and_dropped_after_it(monkeypatch):
    from canary.probe import topic

    admin = topic.TopicAdmin("127.0.0.1:1", away_grace=60)
    clock = [1000.0]
    monkeypatch.setattr(topic.time, "monotonic", lambda: clock[0])
    assert admin._with_recently_seen({1: "a", 2: "b", 3: None}) == {1: "a", 2: "b", 3: None}
    clock[0] += 30  # broker 3 restarting: still planned for, so nothing is reassigned off it
    brokers = admin._with_recently_seen({1: "a", 2: "b"})
    assert brokers == {1: "a", 2: "b", 3: None}
    created = plan(SPEC, TopicState(brokers={1: None, 2: None, 3: None}, exists=False)).create
    assert not plan(SPEC, _state_from(created, brokers)).reassign
    clock[0] += 31  # gone for longer than the grace: removed
    assert admin._with_recently_seen({1: "a", 2: "b"}) == {1: "a", 2: "b"}
    assert topic.TopicAdmin("127.0.0.1:1", away_grace=0)._with_recently_seen({1: None}) == {1: None}  # live only


def test_while_a_rollout_holds_the_lock_a_broker_away_is_never_dropped(monkeypatch):
    from canary.probe import topic
    from canary.probe.config import ProbeConfig

    assert ProbeConfig(bootstrap_servers="b:1").away_grace >= 300  # a broker down is watched, not reassigned away
    admin = topic.TopicAdmin("127.0.0.1:1", away_grace=60)
    clock = [1000.0]
    monkeypatch.setattr(topic.time, "monotonic", lambda: clock[0])
    admin._with_recently_seen({1: "a", 2: "b", 3: None})
    clock[0] += 3600  # an hour away, far beyond the grace: still a broker while the rollout runs
    assert admin._with_recently_seen({1: "a", 2: "b"}, rollout_running=True) == {1: "a", 2: "b", 3: None}
    assert admin._with_recently_seen({1: "a", 2: "b"}, rollout_running=False) == {1: "a", 2: "b"}


def test_a_broker_heading_an_orphan_too_keeps_its_own_partition_and_the_returning_broker_gets_its_back():
    # broker 2 killed: its partition 1 is an orphan, moved onto the live brokers with broker 3 first
    brokers = {1: None, 2: None, 3: None}
    created = plan(SPEC, TopicState(brokers=brokers, exists=False)).create
    owners = plan(SPEC, _state_from(created, brokers)).owners
    assert owners == {1: 0, 2: 1, 3: 2}
    down = plan(SPEC, _state_from(created, {1: None, 3: None}), previous_owners=owners)
    assert down.orphans == [1] and down.owners == {1: 0, 3: 2}
    after = [down.reassign.get(p, r) for p, r in enumerate(created)]
    assert after[1][0] == 3 and after[2][0] == 3  # broker 3 heads two partitions now
    assert plan(SPEC, _state_from(after, brokers)).owners[3] == 1  # a new probe cannot tell them apart
    again = plan(SPEC, _state_from(after, {1: None, 3: None}), previous_owners=down.owners)
    assert again.owners == {1: 0, 3: 2} and not again.changes_anything
    # broker 2 back: broker 3 keeps partition 2, broker 2 takes its partition 1 back
    back = plan(SPEC, _state_from(after, brokers), previous_owners=again.owners)
    assert back.owners == {1: 0, 2: 1, 3: 2} and back.reassign[1][0] == 2


def test_the_load_topic_meets_the_brokers_segment_size_and_closes_segments_by_time():
    load, probe = LOAD_TOPIC_SPEC.configs(3), TopicSpec("__kafka_canary").configs(3)
    assert "segment.bytes" not in load and load["segment.ms"] == "60000" and load["retention.bytes"] == str(64 << 20)
    assert probe["segment.bytes"] == str(4 << 20) and "segment.ms" not in probe
