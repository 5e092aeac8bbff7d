import json

from canary.probe.message import ProbeMessage, decode
from canary.probe.tracker import Tracker, TrackerIdentity

ID = TrackerIdentity(run_id="run1", topic="canary", producer_id="probe-a", epoch="e1")


def _tracker(sla_ms=10_000):
    observations = []
    return Tracker(ID, sla_ms, observations.append), observations


def _send(tracker, partition=0, now=1000.0, lane="baseline", leader=1):
    return tracker.next_message(partition, leader, lane, now)


def _outcomes(observations):
    return [(o.partition, o.seq, o.outcome) for o in observations]


def test_in_order_round_trip_is_delivered_with_both_latencies():
    tracker, obs = _tracker()
    msgs = [_send(tracker, now=1000.0 + i) for i in range(3)]
    for i, m in enumerate(msgs):
        tracker.acked(0, m.seq, offset=10 + i, now_ms=1005.0 + i)
    for i, m in enumerate(msgs):
        assert tracker.record(0, 10 + i, m.encode(200), now_ms=1020.0 + i) == "own"
    assert _outcomes(obs) == [(0, 0, "delivered"), (0, 1, "delivered"), (0, 2, "delivered")]
    assert obs[0].produce_latency_ms == 5 and obs[0].e2e_latency_ms == 20
    assert obs[0].lane == "baseline" and obs[0].leader == 1 and obs[0].message_id == "e1-0-0"
    lane = tracker.ledger.by_lane()["baseline"]
    assert lane.counts["delivered"] == 3 and lane.counts["lost"] == 0 and lane.produce.n == 3 and lane.e2e.n == 3


def test_receive_before_ack_waits_for_the_ack():
    tracker, obs = _tracker()
    m = _send(tracker)
    tracker.record(0, 5, m.encode(), now_ms=1010.0)
    assert obs == []
    tracker.acked(0, m.seq, 5, now_ms=1012.0)
    assert _outcomes(obs) == [(0, 0, "delivered")]


def test_duplicate_counted_once_per_extra_receipt():
    tracker, obs = _tracker()
    m = _send(tracker)
    tracker.acked(0, m.seq, 5, 1002.0)
    tracker.record(0, 5, m.encode(), 1010.0)
    assert tracker.record(0, 6, m.encode(), 1011.0) == "duplicate"
    assert tracker.record(0, 7, m.encode(), 1012.0) == "duplicate"
    assert _outcomes(obs) == [(0, 0, "delivered"), (0, 0, "duplicate"), (0, 0, "duplicate")]
    assert tracker.ledger.by_lane()["baseline"].counts["duplicated"] == 2


def test_gap_declares_the_skipped_acked_message_lost():
    tracker, obs = _tracker()
    a, b, c = (_send(tracker, now=1000.0 + i) for i in range(3))
    for i, m in enumerate((a, b, c)):
        tracker.acked(0, m.seq, 20 + i, 1005.0)
    tracker.record(0, 20, a.encode(), 1010.0)
    tracker.record(0, 22, c.encode(), 1011.0)  # offset 21 (b) was passed
    assert _outcomes(obs) == [(0, 0, "delivered"), (0, 1, "lost"), (0, 2, "delivered")]
    assert "gap" in obs[1].error
    assert tracker.record(0, 21, b.encode(), 1012.0) == "late"
    assert tracker.ledger.by_lane()["baseline"].counts["late"] == 1


def test_out_of_order_by_sequence():
    tracker, obs = _tracker()
    a, b = _send(tracker), _send(tracker)
    tracker.acked(0, b.seq, 30, 1005.0)  # a retry put b before a in the log
    tracker.acked(0, a.seq, 31, 1006.0)
    tracker.record(0, 30, b.encode(), 1010.0)
    tracker.record(0, 31, a.encode(), 1011.0)
    assert _outcomes(obs) == [(0, 1, "delivered"), (0, 0, "out_of_order")]


def test_sla_expiry_declares_lost_only_acked_messages():
    tracker, obs = _tracker(sla_ms=1000)
    acked, unacked = _send(tracker, now=1000.0), _send(tracker, now=1000.0)
    tracker.acked(0, acked.seq, 1, 1002.0)
    assert tracker.expire(1500.0) == 0
    assert tracker.expire(2500.0) == 1
    assert _outcomes(obs) == [(0, 0, "lost")]
    assert tracker.unresolved() == {"unacknowledged": 1, "acknowledged_not_received": 0}
    tracker.failed(0, unacked.seq, "Local: Message timed out", 3000.0)
    assert _outcomes(obs)[-1] == (0, 1, "produce_error")
    by_lane = tracker.ledger.by_lane()["baseline"]
    assert by_lane.counts["produce_errors"] == 1 and by_lane.availability == 0.5


def test_foreign_malformed_and_old_epoch_records_never_touch_own_counts():
    tracker, obs = _tracker()
    m = _send(tracker)
    tracker.acked(0, m.seq, 3, 1001.0)
    other = ProbeMessage("probe-b", "e9", "run1", 0, 0, 1000, 1, "baseline")
    restarted_self = ProbeMessage("probe-a", "e0", "run1", 0, 0, 900, 1, "baseline")  # predecessor's epoch
    forged_seq = ProbeMessage("probe-a", "e1", "run1", 0, 99, 900, 1, "baseline")
    assert tracker.record(0, 0, other.encode(), 1002.0) == "foreign"
    assert tracker.record(0, 1, restarted_self.encode(), 1002.0) == "foreign"
    assert tracker.record(0, 2, forged_seq.encode(), 1002.0) == "foreign"
    for junk in (b"not json", b"[1,2]", b'{"producerId": "x"}', None, b"\xff\xfe"):
        assert tracker.record(0, 2, junk, 1002.0) == "malformed"
    assert tracker.foreign_records == 3 and tracker.malformed_records == 5
    tracker.record(0, 3, m.encode(), 1003.0)
    assert _outcomes(obs) == [(0, 0, "delivered")]


def test_late_start_only_tracks_what_this_probe_sent():
    tracker, obs = _tracker()
    # records sent before this probe started (no stream yet on partition 2) are foreign, not lost
    old = ProbeMessage("probe-a", "e1", "run1", 2, 0, 1, 1, "baseline")
    assert tracker.record(2, 0, old.encode(), 1000.0) == "foreign"
    assert tracker.expire(10**9) == 0 and obs == []


def test_per_lane_ledger_and_message_fields():
    tracker, obs = _tracker()
    c = _send(tracker, partition=1, lane="canary", leader=3)
    body = json.loads(c.encode(300))
    assert len(c.encode(300)) == 300
    assert {"producerId", "messageId", "timestamp", "seq", "lane"} <= set(body)
    assert decode(c.encode(300)) == c
    tracker.acked(1, c.seq, 0, 1003.0)
    tracker.record(1, 0, c.encode(), 1004.0)
    assert obs[0].lane == "canary" and obs[0].leader == 3
    assert set(tracker.ledger.by_lane()) == {"canary"}


def test_observations_keep_the_microsecond_and_read_back():
    from canary.observations import BadObservation, Observation

    tracker, obs = _tracker()
    m = _send(tracker, now=1_700_000_000_000.1234)
    tracker.acked(0, m.seq, offset=1, now_ms=1_700_000_000_001.5678)
    tracker.record(0, 1, m.encode(200), now_ms=1_700_000_000_003.4321)
    (o,) = obs
    assert (o.send_ts, o.ack_ts, o.receive_ts) == (1_700_000_000_000.123, 1_700_000_000_001.568, 1_700_000_000_003.432)
    assert round(o.e2e_latency_ms, 3) == 3.309  # not 3, as whole milliseconds made it
    again = Observation.from_json(o.to_json())
    assert again == o
    for bad in (float("nan"), float("inf"), True, "1700000000000"):
        record = json.loads(o.to_json()) | {"send_ts": bad}
        try:
            Observation.from_json(json.dumps(record))
        except BadObservation as exc:
            assert exc.reason == "malformed" and "send_ts" in str(exc)
        else:
            raise AssertionError(f"send_ts {bad!r} was taken")


def test_the_clients_own_ack_latency_leaves_out_serving_the_report_but_never_exceeds_the_wall_clock():
    tracker, obs = _tracker()
    late, early = _send(tracker, now=1000.0), _send(tracker, now=1000.0)
    # the report of `late` was served 9 ms after the client had the response (2.5 ms after the send)
    tracker.acked(0, late.seq, 10, now_ms=1011.5, client_latency_ms=2.5)
    tracker.acked(0, early.seq, 11, now_ms=1003.0, client_latency_ms=7.0)  # a clock step: the wall clock caps it
    tracker.record(0, 10, late.encode(), now_ms=1004.0)
    tracker.record(0, 11, early.encode(), now_ms=1004.0)
    assert [o.produce_latency_ms for o in obs] == [2.5, 3.0]
    assert tracker.ledger.by_lane()["baseline"].produce.max == 3.0


def test_counts_without_latency_leave_the_histograms_out():
    tracker, _ = _tracker()
    m = _send(tracker, now=1000.0)
    tracker.acked(0, m.seq, 0, now_ms=1004.0)
    tracker.record(0, 0, m.encode(), now_ms=1005.0)
    full = tracker.ledger.by_lane(window_from_ms=0)["baseline"]
    counts = tracker.ledger.by_lane(window_from_ms=0, latency=False)["baseline"]
    assert counts.counts == full.counts and counts.counts["delivered"] == 1
    assert full.produce.n == 1 and counts.produce.n == 0 and counts.availability == 1.0
