import logging
import time

import pytest
from client_fakes import FakeProducer, FakeView, lanes_of

from canary.clients import LaneProducer
from canary.observations import Observation
from canary.probe.sink import ObservationSink

LABELS = {"client": "orders-canary-1", "topic": "orders", "lane": "canary"}


def _producer(view, metrics, **kwargs) -> tuple[LaneProducer, FakeProducer]:
    fake = FakeProducer()
    return LaneProducer({"client.id": "orders-canary-1"}, view=view, metrics=metrics, producer=fake, **kwargs), fake


def test_the_lane_comes_from_the_client_id_or_the_argument(six_partitions, metrics):
    view = FakeView(six_partitions)
    assert LaneProducer({"client.id": "orders-canary-1"}, view=view, metrics=metrics, producer=FakeProducer()).lane \
        == "canary"
    assert LaneProducer({"client.id": "orders-1"}, view=view, metrics=metrics, producer=FakeProducer()).lane \
        == "baseline"
    assert LaneProducer({"client.id": "orders-1"}, lane="canary", view=view, metrics=metrics,
                        producer=FakeProducer()).lane == "canary"
    with pytest.raises(ValueError, match="lane must be one of"):
        LaneProducer({}, lane="blue", view=view, metrics=metrics, producer=FakeProducer())


def test_records_go_to_the_lanes_partitions_with_the_callers_arguments(six_partitions, metrics):
    producer, fake = _producer(FakeView(six_partitions), metrics)
    delivered = []
    returned = [producer.produce("orders", b"v", key=f"k{i}", headers={"h": b"1"}, timestamp=1234,
                                 on_delivery=lambda err, msg: delivered.append((err, msg.partition())))
                for i in range(20)]
    assert {s["partition"] for s in fake.sent} == {2, 5} and [s["partition"] for s in fake.sent] == returned
    # the caller's headers, and the canary's mark (a canary consumer settles what a canary wrote: test_lane_consumer)
    assert all(s["headers"] == {"h": b"1", "kafka-canary-lane": b"canary"} and s["timestamp"] == 1234
               and s["value"] == b"v" for s in fake.sent)
    assert producer.poll(0) == 20 and [p for _, p in delivered] == returned and all(e is None for e, _ in delivered)
    assert metrics.registry.get_sample_value("kafka_canary_client_lane_fallback", LABELS) == 0
    assert metrics.registry.get_sample_value("kafka_canary_client_produce_latency_seconds_count", LABELS) == 20
    assert producer.lane_partitions("orders") == ((2, 5), False)


def test_only_the_canary_lane_marks_its_records_and_it_can_be_told_not_to(six_partitions, metrics):
    view = FakeView(six_partitions)
    for config, extra, headers in (({"client.id": "orders-canary-1"}, {}, [("kafka-canary-lane", b"canary")]),
                                   ({"client.id": "orders-1"}, {}, None),
                                   ({"client.id": "orders-canary-1"}, {"mark_records": False}, None)):
        fake = FakeProducer()
        LaneProducer(config, view=view, metrics=metrics, producer=fake, **extra).produce("orders", b"v")
        assert fake.sent[0].get("headers") == headers, (config, extra)
    fake = FakeProducer()
    LaneProducer({"client.id": "orders-canary-1"}, view=view, metrics=metrics, producer=fake).produce(
        "orders", b"v", headers=[("trace", b"t")])
    assert fake.sent[0]["headers"] == [("trace", b"t"), ("kafka-canary-lane", b"canary")]


def test_fallback_is_logged_once_counted_and_ends_when_canary_partitions_return(six_partitions, metrics, caplog):
    view = FakeView(lanes_of("orders", {p: 1 for p in range(4)}))  # nobody canary leads anything
    producer, fake = _producer(view, metrics)
    with caplog.at_level(logging.INFO, logger="canary.clients.producer"):
        for i in range(40):
            producer.produce("orders", b"v", key=None if i % 2 else str(i))
        assert {s["partition"] for s in fake.sent} == {0, 1, 2, 3}
        assert producer.falling_back == {"orders": True}
        assert metrics.registry.get_sample_value("kafka_canary_client_lane_fallback", LABELS) == 1
        assert metrics.registry.get_sample_value("kafka_canary_client_lane_fallback_records_total", LABELS) == 40
        view.set(six_partitions)
        assert producer.produce("orders", b"v") in (2, 5)
    assert metrics.registry.get_sample_value("kafka_canary_client_lane_fallback", LABELS) == 0
    assert metrics.registry.get_sample_value("kafka_canary_client_lane_fallback_records_total", LABELS) == 40
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "no canary partition" in warnings[0].getMessage()
    assert any("fallback over" in r.getMessage() for r in caplog.records)


def test_delivery_reports_become_client_observations_and_errors_refresh_the_view(six_partitions, metrics, tmp_path):
    sink = ObservationSink(None, None, path=tmp_path / "obs.jsonl")
    view = FakeView(six_partitions)
    producer, fake = _producer(view, metrics, observations=sink, run_id="run-7")
    fake.failing = {5}
    chosen = [producer.produce("orders", b"v") for _ in range(10)]
    producer.flush(1)
    sink.close()
    observed = [Observation.from_json(line) for line in (tmp_path / "obs.jsonl").read_text().splitlines()]
    assert len(observed) == 10 and [o.partition for o in observed] == chosen
    assert {(o.run_id, o.kind, o.source, o.producer_id, o.lane, o.topic) for o in observed} == {
        ("run-7", "client", "orders-canary-1", "orders-canary-1", "canary", "orders")}
    assert {o.partition: o.leader for o in observed} == {2: 3, 5: 3}
    assert {o.outcome for o in observed if o.partition == 2} == {"delivered"}
    assert {(o.outcome, o.error) for o in observed if o.partition == 5} == {("produce_error",
                                                                            "Local: Message timed out")}
    assert all(o.ack_ts >= o.send_ts and o.receive_ts is None for o in observed)
    assert len({o.message_id for o in observed}) == 10
    assert sorted(o.seq for o in observed if o.partition == 2) == list(range(5))
    assert view.refreshes == 5
    assert metrics.registry.get_sample_value("kafka_canary_client_produce_error_total",
                                             {**LABELS, "partition": "5"}) == 5


def test_observations_need_a_run_id(six_partitions, metrics, tmp_path, monkeypatch):
    monkeypatch.delenv("KAFKA_CANARY_RUN_ID", raising=False)
    sink = ObservationSink(None, None, path=tmp_path / "obs.jsonl")
    with pytest.raises(ValueError, match="run id"):
        _producer(FakeView(six_partitions), metrics, observations=sink)
    monkeypatch.setenv("KAFKA_CANARY_RUN_ID", "from-env")
    producer, _ = _producer(FakeView(six_partitions), metrics, observations=sink)
    producer.produce("orders", b"v")
    producer.close()
    sink.close()
    assert Observation.from_json((tmp_path / "obs.jsonl").read_text().splitlines()[0]).run_id == "from-env"


def test_produce_latency_is_the_clients_own_not_when_the_application_polls(six_partitions, metrics, tmp_path):
    """A service that polls for its delivery reports a while after sending is measured by librdkafka's latency of
    each record (the broker's response), as fast as one that polls after every record."""
    sink = ObservationSink(None, None, path=tmp_path / "obs.jsonl")
    producer, fake = _producer(FakeView(six_partitions), metrics, observations=sink, run_id="run-8")
    fake.latency = 0.004
    for _ in range(5):
        producer.produce("orders", b"v")
    time.sleep(0.2)  # the application's own work before it polls
    producer.poll(0)
    sink.close()
    observed = [Observation.from_json(line) for line in (tmp_path / "obs.jsonl").read_text().splitlines()]
    assert len(observed) == 5 and all(o.ack_ts - o.send_ts == pytest.approx(4.0, abs=0.01) for o in observed)
    assert metrics.registry.get_sample_value("kafka_canary_client_produce_latency_seconds_sum", LABELS) == \
        pytest.approx(5 * 0.004, abs=1e-4)
