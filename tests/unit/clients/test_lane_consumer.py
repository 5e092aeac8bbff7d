import pytest
from client_fakes import FakeConsumer, FakeProducer, FakeRecord, FakeView, lanes_of
from confluent_kafka import OFFSET_INVALID

from canary.clients import LaneConsumer, LaneProducer, lane_assignment
from canary.observations import Observation
from canary.probe.sink import ObservationSink

CONFIG = {"group.id": "billing", "group.instance.id": "billing-canary-0"}
BASELINE = {"group.id": "billing", "group.instance.id": "billing-0"}


def test_lane_assignment_takes_the_lanes_partitions_split_over_instances(six_partitions):
    other = lanes_of("refunds", {0: 3, 1: 1})
    assert lane_assignment([six_partitions, other], "canary") == {("orders", 2), ("orders", 5), ("refunds", 0)}
    assert lane_assignment([six_partitions], "baseline") == {("orders", p) for p in (0, 1, 3, 4)}
    halves = [lane_assignment([six_partitions], "baseline", i, 2) for i in range(2)]
    assert halves == [{("orders", 0), ("orders", 3)}, {("orders", 1), ("orders", 4)}]


def test_a_leaderless_partition_stays_with_its_holder_and_no_one_else_takes_it(six_partitions):
    election = lanes_of("orders", {**six_partitions.leaders, 5: None})
    held = {("orders", 2), ("orders", 5)}
    assert lane_assignment([election], "canary", current=held) == held
    assert ("orders", 5) not in lane_assignment([election], "baseline", current={("orders", 0)})


def test_the_consumer_starts_its_lane_at_the_committed_offsets(six_partitions, metrics):
    fake = FakeConsumer(committed={("orders", 2): 40})
    consumer = LaneConsumer(CONFIG, "orders", view=FakeView(six_partitions), metrics=metrics, consumer=fake)
    assert consumer.lane == "canary" and consumer.client_id == "billing-canary-0"
    assert fake.assigned == {("orders", 2): 40, ("orders", 5): OFFSET_INVALID}
    assert consumer.start_offsets == {("orders", 2): 40, ("orders", 5): OFFSET_INVALID}
    assert metrics.registry.get_sample_value("kafka_canary_client_assigned_partitions", {
        "client": "billing-canary-0", "topic": "orders", "lane": "canary"}) == 2


def test_a_partition_leaving_the_lane_is_committed_then_released_and_its_stale_records_dropped(
        six_partitions, metrics):
    view = FakeView(six_partitions)
    fake = FakeConsumer()
    consumer = LaneConsumer(CONFIG, ["orders"], view=view, metrics=metrics, consumer=fake)
    fake.queue = [FakeRecord("orders", 5, 7, b"a")]
    msg = consumer.poll(0)
    with consumer.processing(msg):
        pass
    assert fake.stored == {("orders", 5): 8}
    view.set(lanes_of("orders", {**six_partitions.leaders, 5: 1}))  # broker 3 no longer leads 5
    fake.queue = [FakeRecord("orders", 5, 8, b"stale"), FakeRecord("orders", 2, 0, b"ok")]
    assert consumer.poll(0) is None  # fetched before the release: partition 5's new lane reads it
    assert fake.calls[-2:] == [("commit", [("orders", 5, 8)]), ("unassign", [("orders", 5)])]
    assert consumer.poll(0).partition() == 2
    assert consumer.assignment == {("orders", 2)}
    view.set(six_partitions)  # and back: taken at the committed offset
    consumer.poll(0)
    assert fake.calls[-1] == ("assign", [("orders", 5, 8)])


def test_processing_records_latency_errors_lag_and_stores_only_what_did_not_raise(six_partitions, metrics,
                                                                                  tmp_path):
    sink = ObservationSink(None, None, path=tmp_path / "obs.jsonl")
    fake = FakeConsumer(high=10)
    consumer = LaneConsumer(CONFIG, "orders", view=FakeView(six_partitions), metrics=metrics, consumer=fake,
                            observations=sink, run_id="run-1")
    fake.queue = [FakeRecord("orders", 2, 3, b"good", timestamp=1_000), FakeRecord("orders", 5, 4, b"bad")]
    with consumer.processing(consumer.poll(0)):
        pass
    with pytest.raises(ValueError, match="malformed"), consumer.processing(consumer.poll(0)):
        raise ValueError("malformed record")
    consumer.close()
    sink.close()
    assert fake.stored == {("orders", 2): 4}  # the record that raised is left to the partition's next owner
    assert fake.calls[-1] == ("commit", [("orders", 2, 4)]) and fake.closed
    good, bad = [Observation.from_json(line) for line in (tmp_path / "obs.jsonl").read_text().splitlines()]
    assert (good.outcome, good.lane, good.kind, good.source, good.partition, good.leader, good.seq, good.lag) == (
        "delivered", "canary", "client", "billing-canary-0", 2, 3, 3, 6)
    assert good.send_ts == 1_000 and good.receive_ts > good.send_ts and good.processing_ms >= 0
    assert good.message_id == "orders-2@3"
    assert (bad.outcome, bad.error, bad.lag) == ("processing_error", "ValueError: malformed record", 5)
    assert bad.send_ts == bad.receive_ts  # no record timestamp: the receipt stands in
    labels = {"client": "billing-canary-0", "topic": "orders", "lane": "canary"}
    assert metrics.registry.get_sample_value("kafka_canary_client_processing_error_total", labels) == 1
    assert metrics.registry.get_sample_value("kafka_canary_client_processing_latency_seconds_count", labels) == 2


def test_messages_marks_the_previous_record_processed_and_the_baseline_goes_on_after_errors(six_partitions,
                                                                                            metrics):
    fake = FakeConsumer()
    consumer = LaneConsumer(BASELINE, "orders", view=FakeView(six_partitions), metrics=metrics, consumer=fake)
    fake.queue = [FakeRecord("orders", 0, i, b"x") for i in range(3)]
    seen = []
    for msg in consumer.messages(poll_timeout=0):
        seen.append(msg.offset())
        assert fake.stored.get(("orders", 0), 0) == msg.offset()  # the one before is stored, this one not yet
        if len(seen) == 3:
            break
    fake.queue = [FakeRecord("orders", 1, i, b"x") for i in range(4)]

    def handler(msg):
        if msg.offset() % 2:
            raise RuntimeError("boom")
    assert consumer.process(handler, max_messages=4, poll_timeout=0) == 4
    assert fake.stored[("orders", 1)] == 4  # the baseline goes on: the records that raised are skipped
    assert metrics.registry.get_sample_value("kafka_canary_client_processing_error_total", {
        "client": "billing-0", "topic": "orders", "lane": "baseline"}) == 2
    assert not [c for c in fake.calls if c[0] in ("pause", "seek")]


def test_the_canary_holds_a_record_of_the_fleets_it_failed_and_retries_it(six_partitions, metrics, monkeypatch):
    """A canary version never commits past a record of the fleet's it could not process: the partition is paused
    at it and the record retried (each attempt an error), the other partitions go on; what a canary client wrote
    is its own to skip."""
    clock = [100.0]
    monkeypatch.setattr("canary.clients.consumer.time.monotonic", lambda: clock[0])
    fake = FakeConsumer()
    consumer = LaneConsumer(CONFIG, "orders", view=FakeView(six_partitions), metrics=metrics, consumer=fake)
    fake.queue = [FakeRecord("orders", 2, 0, b"ok"), FakeRecord("orders", 2, 1, b"fails"),
                  FakeRecord("orders", 2, 2, b"prefetched"), FakeRecord("orders", 5, 0, b"other partition")]
    attempts = []

    def handler(msg):
        attempts.append((msg.partition(), msg.offset()))
        if msg.value() == b"fails" and len(attempts) < 5:
            raise ValueError("cannot bill")
    consumer.process(handler, max_messages=3, poll_timeout=0)
    assert attempts == [(2, 0), (2, 1), (5, 0)]  # offset 2 was fetched before the hold: dropped
    assert fake.stored == {("orders", 2): 1, ("orders", 5): 1}  # never past the held record
    assert ("pause", [("orders", 2)]) in fake.calls and ("seek", ("orders", 2, 1)) in fake.calls
    fake.queue = [FakeRecord("orders", 2, 1, b"fails")]
    assert consumer.poll(0) is None  # not due: not resumed, and a record fetched before the pause is dropped
    clock[0] += 0.1
    fake.queue = [FakeRecord("orders", 2, 1, b"fails")]
    consumer.process(handler, max_messages=1, poll_timeout=0)  # retried at 0.1 s, fails again
    assert fake.calls[-4:] == [("seek", ("orders", 2, 1)), ("resume", [("orders", 2)]), ("pause", [("orders", 2)]),
                              ("seek", ("orders", 2, 1))]
    assert consumer._held[("orders", 2)].attempts == 2
    clock[0] += 0.2  # the backoff doubled
    fake.queue = [FakeRecord("orders", 2, 1, b"fails"), FakeRecord("orders", 2, 2, b"next")]
    consumer.process(handler, max_messages=2, poll_timeout=0)
    assert attempts[-3:] == [(2, 1), (2, 1), (2, 2)] and fake.stored[("orders", 2)] == 3  # then it succeeded
    assert metrics.registry.get_sample_value("kafka_canary_client_processing_error_total", {
        "client": "billing-canary-0", "topic": "orders", "lane": "canary"}) == 2  # an error per failed attempt
    consumer.close()
    assert fake.committed_offsets == {("orders", 2): 3, ("orders", 5): 1}

    own = FakeConsumer()  # a record a canary producer wrote: the canary's own poison, skipped as the baseline would
    consumer = LaneConsumer(CONFIG, "orders", view=FakeView(six_partitions), metrics=metrics, consumer=own)
    own.queue = [FakeRecord("orders", 5, 0, b"malformed", headers=[("kafka-canary-lane", b"canary")])]
    consumer.process(lambda msg: 1 / 0, max_messages=1, poll_timeout=0)
    assert own.stored == {("orders", 5): 1} and not consumer._held


def test_a_failed_retry_is_observed_when_it_happened_and_the_success_at_the_records_time(six_partitions, metrics,
                                                                                          tmp_path, monkeypatch):
    """The judge windows observations by their send time: a retry that failed again is an event of its own (a
    record held since the warm-up would otherwise never be judged); the success keeps the record's own time, so its
    e2e latency shows the wait."""
    clock = [100.0]
    monkeypatch.setattr("canary.clients.consumer.time.monotonic", lambda: clock[0])
    sink = ObservationSink(None, None, path=tmp_path / "obs.jsonl")
    fake = FakeConsumer()
    consumer = LaneConsumer(CONFIG, "orders", view=FakeView(six_partitions), metrics=metrics, consumer=fake,
                            observations=sink, run_id="run-1")
    for fails in (True, True, False):
        fake.queue = [FakeRecord("orders", 2, 7, b"x", timestamp=1_000)]
        consumer.process(lambda msg, fails=fails: fails and 1 / 0, max_messages=1, poll_timeout=0)
        clock[0] += 1
    consumer.close()
    sink.close()
    first, retry, success = [Observation.from_json(line) for line in (tmp_path / "obs.jsonl").read_text().splitlines()]
    assert (first.outcome, first.send_ts) == ("processing_error", 1_000)
    assert retry.outcome == "processing_error" and retry.send_ts == retry.receive_ts > 1_000
    assert (success.outcome, success.send_ts) == ("delivered", 1_000)


def test_a_held_partition_that_leaves_the_lane_is_released_at_the_held_record(six_partitions, metrics):
    view = FakeView(six_partitions)
    fake = FakeConsumer()
    consumer = LaneConsumer(CONFIG, "orders", view=view, metrics=metrics, consumer=fake)
    fake.queue = [FakeRecord("orders", 5, 0, b"ok"), FakeRecord("orders", 5, 1, b"fails")]
    consumer.process(lambda msg: msg.offset() == 1 and 1 / 0, max_messages=2, poll_timeout=0)
    view.set(lanes_of("orders", {**six_partitions.leaders, 5: 1}))  # the rollback: 5 goes back to the baseline
    consumer.poll(0)
    assert ("commit", [("orders", 5, 1)]) in fake.calls and not consumer._held  # its next owner bills record 1


def test_messages_never_stores_a_record_whose_processing_raised(six_partitions, metrics):
    fake = FakeConsumer()
    consumer = LaneConsumer(CONFIG, "orders", view=FakeView(six_partitions), metrics=metrics, consumer=fake)
    fake.queue = [FakeRecord("orders", 2, i, b"x") for i in range(3)]
    with pytest.raises(ValueError):  # the service dies of record 1
        for msg in consumer.messages(poll_timeout=0):
            with consumer.processing(msg):
                if msg.offset() == 1:
                    raise ValueError("cannot bill")
    consumer.close()
    assert fake.committed_offsets == {("orders", 2): 1}  # its next owner starts at record 1


def test_bad_arguments_are_refused(six_partitions, metrics):
    view = FakeView(six_partitions)
    with pytest.raises(ValueError, match="group.id"):
        LaneConsumer({"client.id": "x"}, "orders", view=view, metrics=metrics, consumer=FakeConsumer())
    with pytest.raises(ValueError, match="instance"):
        LaneConsumer(CONFIG, "orders", instance=2, instances=2, view=view, metrics=metrics, consumer=FakeConsumer())
    with pytest.raises(ValueError, match="topic"):
        LaneConsumer(CONFIG, [], view=view, metrics=metrics, consumer=FakeConsumer())


def test_what_the_service_wrote_while_processing_a_record_is_counted_once_it_writes(six_partitions, metrics,
                                                                                    tmp_path):
    """A consume-transform-produce service: the records its LaneProducer writes inside processing() are that
    record's outputs; a record it processed and wrote nothing for is a silent drop (0), and before its processing
    ever wrote anything (a consumer-only service) outputs are not counted at all (None)."""
    sink = ObservationSink(None, None, path=tmp_path / "obs.jsonl")
    fake = FakeConsumer(high=10)
    consumer = LaneConsumer(CONFIG, "orders", view=FakeView(six_partitions), metrics=metrics, consumer=fake,
                            observations=sink, run_id="run-1")
    payments = LaneProducer({"client.id": "billing-canary-0"}, view=FakeView(six_partitions), metrics=metrics,
                            producer=FakeProducer())
    fake.queue = [FakeRecord("orders", 2, o, b"order") for o in range(4)]
    for writes in (0, 2, 0, 1):
        with consumer.processing(consumer.poll(0)):
            for _ in range(writes):
                payments.produce("payments", b"paid")
    payments.produce("payments", b"outside any processing")  # counted by no record
    consumer.close()
    sink.close()
    observed = [Observation.from_json(line) for line in (tmp_path / "obs.jsonl").read_text().splitlines()]
    assert [o.outputs for o in observed] == [None, 2, 0, 1]
