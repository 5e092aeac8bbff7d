"""The analysis job's transforms on small data with known answers, and one whole run on files."""

from __future__ import annotations

import json

from pyspark.testing import assertDataFrameEqual

from canary.analysis import AnalysisRequest, job
from canary.judge import Aggregates
from canary.judge import histogram as H
from canary.observations import BrokerReading, Observation, parse_record

COMMON = dict(run_id="run-1", kind="probe", source="probe-0", topic="canary", leader=1, producer_id="p")


def obs(lane="canary", partition=0, seq=0, send=1_000, ack=1_002, recv=1_005, outcome="delivered", **kw) -> str:
    o = Observation(lane=lane, partition=partition, message_id=f"m{seq}", seq=seq, send_ts=send, ack_ts=ack,
                    receive_ts=recv, outcome=outcome, **{**COMMON, **kw})
    return o.to_json().decode()


def raw(spark, lines):
    return spark.createDataFrame([(line,) for line in lines], "value string")


def test_parse_names_every_kind_of_bad_observation(spark):
    lines = [obs(), "{not json", json.dumps({"lane": "canary"}), obs(lane="purple"), obs(outcome="vanished"),
             obs(recv=900), json.loads(obs()) and obs().replace('"schema":1', '"schema":9')]
    out = job.parse(raw(spark, lines)).select("bad_reason")
    expected = spark.createDataFrame([(None,), ("malformed",), ("malformed",), ("unknown_lane",),
                                      ("unknown_outcome",), ("clock_skew",), ("schema_version",)], "bad_reason string")
    assertDataFrameEqual(out, expected)


def test_transform_counts_outcomes_partitions_leaders_latency_bins_and_bad_data(spark):
    lines = [obs(seq=0, send=1_000, ack=1_002, recv=1_005),
             obs(seq=1, send=2_000.125, ack=2_002.125, recv=2_005.125, partition=1),  # microseconds kept
             obs(seq=2, send=3_000, ack=None, recv=None, outcome="produce_error"),
             obs(lane="baseline", partition=2, seq=0, send=12_000, ack=12_001, recv=12_010, leader=3),
             obs(recv=500),  # clock skew
             "garbage",
             obs(send=99_000)]  # outside the window: left out silently
    out = job.transform(job.parse(raw(spark, lines)), bucket_ms=10_000, from_ms=0, to_ms=50_000)
    b2, b5, b1, b10 = H.bin_of(2), H.bin_of(5), H.bin_of(1), H.bin_of(10)
    expected = spark.createDataFrame([
        ("canary", 0, "outcome.delivered", 0, 2), ("canary", 0, "outcome.produce_error", 0, 1),
        ("canary", 0, "partition", 0, 2), ("canary", 0, "partition", 1, 1), ("canary", 0, "leader", 1, 3),
        ("canary", 0, "produce_latency_ms", b2, 2), ("canary", 0, "e2e_latency_ms", b5, 2),
        ("baseline", 10_000, "outcome.delivered", 0, 1), ("baseline", 10_000, "partition", 2, 1),
        ("baseline", 10_000, "leader", 3, 1),
        ("baseline", 10_000, "produce_latency_ms", b1, 1), ("baseline", 10_000, "e2e_latency_ms", b10, 1),
        ("_bad", 0, "bad.clock_skew", 0, 1), ("_bad", -1, "bad.malformed", 0, 1),
    ], "lane string, bucket_start_ms long, metric string, bin int, count long")
    assertDataFrameEqual(out, expected)


def test_sub_millisecond_latencies_are_kept_to_their_bin(spark):
    """A 3.4 ms and a 3.9 ms latency are apart (two 2 % bins), where whole milliseconds made both 3 or 4."""
    lines = [obs(seq=0, send=1_000.0, ack=1_001.4, recv=1_003.4), obs(seq=1, send=1_000.5, ack=1_001.9, recv=1_004.4)]
    out = job.transform(job.parse(raw(spark, lines)), bucket_ms=10_000).where("metric = 'e2e_latency_ms'")
    assert sorted(r["bin"] for r in out.collect()) == [H.bin_of(3.4), H.bin_of(3.9)]
    assert H.bin_of(3.4) != H.bin_of(3.9)


def test_spark_bins_match_the_judges_bins(spark):
    values = [0.0, 0.009, 0.01, 1.0, 4.999, 5.0, 123.4, 10_000.0]
    df = spark.createDataFrame([(v,) for v in values], "x double")
    out = df.select(job._bin(df.x).alias("bin"))
    assertDataFrameEqual(out, spark.createDataFrame([(H.bin_of(v),) for v in values], "bin int"))


def test_whole_run_on_parquet_writes_verdict_aggregates_and_report(spark, tmp_path):
    # 2 minutes of 30 msg/s: canary partition 0, baseline partitions 1 and 2; the canary loses 10 %.
    records = []
    for i in range(3600):
        send = 1_700_000_000_000 + i * 33 + 0.375  # sub-millisecond times, as the probe writes them
        lane, part = ("canary", 0) if i % 3 == 0 else ("baseline", 1 + i % 2)
        lost = lane == "canary" and i % 30 == 0
        recv, outcome = (None, "lost") if lost else (send + 5 + i % 7, "delivered")
        records.append(json.loads(obs(lane=lane, partition=part, seq=i, send=send, ack=send + 2, recv=recv,
                                      outcome=outcome)))
    source = tmp_path / "obs.parquet"
    spark.createDataFrame(records, job.OBSERVATION_SCHEMA).write.parquet(str(source))
    out = tmp_path / "out"
    verdict = job.run(spark, AnalysisRequest(source, out, run_id="run-1", bucket_s=10.0))
    assert verdict["verdict"] == "ROLLBACK"
    assert {m["name"]: m["decision"] for m in verdict["metrics"]}["loss_rate"] == "FAIL"
    assert json.loads((out / "verdict.json").read_text())["verdict"] == "ROLLBACK"
    history = spark.read.parquet(str(out / "aggregates.parquet"))
    assert history.where("metric = 'outcome.lost' and lane = 'canary'").groupBy().sum("count").first()[0] == 120
    page = (out / "report.html").read_text()
    assert "ROLLBACK" in page and "data:image/png;base64" in page and (out / "time_series.png").exists()


def test_transform_counts_client_histograms_and_agrees_with_the_reference_aggregation(spark):
    # Client observations carry processing time, lag and outputs; several share every key, so the one-pass
    # aggregation must add them up; one lacks a receive time (no e2e bin) and one is excluded.
    lines = [obs(kind="client", seq=i, send=1_000 + i, ack=1_003 + i, recv=1_010 + i, processing_ms=2.5, lag=40,
                 outputs=1) for i in range(3)]
    lines += [obs(kind="client", seq=3, send=4_000, ack=4_001, recv=None, outcome="processing_error",
                  processing_ms=0.004, lag=0, outputs=0),
              obs(kind="client", lane="baseline", partition=1, seq=4, send=11_000, ack=11_002, recv=11_004,
                  processing_ms=1.0, lag=7),
              obs(kind="client", seq=5, send=12_000, ack=11_000, recv=12_004)]  # clock skew
    out = job.transform(job.parse(raw(spark, lines)), bucket_ms=10_000)
    expected = spark.createDataFrame([
        ("canary", 0, "outcome.delivered", 0, 3), ("canary", 0, "outcome.processing_error", 0, 1),
        ("canary", 0, "partition", 0, 4), ("canary", 0, "leader", 1, 4),
        ("canary", 0, "produce_latency_ms", H.bin_of(3), 3),
        ("canary", 0, "produce_latency_ms", H.bin_of(1), 1), ("canary", 0, "e2e_latency_ms", H.bin_of(10), 3),
        ("canary", 0, "processing_ms", H.bin_of(2.5), 3), ("canary", 0, "processing_ms", 0, 1),
        ("canary", 0, "lag", H.bin_of(40), 3), ("canary", 0, "lag", 0, 1),
        ("canary", 0, "outputs", H.bin_of(1), 3), ("canary", 0, "outputs", 0, 1),
        ("baseline", 10_000, "outcome.delivered", 0, 1), ("baseline", 10_000, "partition", 1, 1),
        ("baseline", 10_000, "leader", 1, 1), ("baseline", 10_000, "produce_latency_ms", H.bin_of(2), 1),
        ("baseline", 10_000, "e2e_latency_ms", H.bin_of(4), 1), ("baseline", 10_000, "processing_ms", H.bin_of(1), 1),
        ("baseline", 10_000, "lag", H.bin_of(7), 1),
        ("_bad", 10_000, "bad.clock_skew", 0, 1),
    ], "lane string, bucket_start_ms long, metric string, bin int, count long")
    assertDataFrameEqual(out, expected)
    reference = Aggregates.from_observations([Observation.from_json(line) for line in lines], 10_000)
    good = sorted(tuple(r) for r in out.collect() if r["lane"] != "_bad")
    assert good == sorted((lane, b, metric, k, c) for (lane, metric), by in reference.cells.items()
                          for b, h in by.items() for k, c in h.items())
    assert reference.bad == {"clock_skew": 1}


def reading(broker=1, lane="canary", metric="produce_total_time_p99_ms", value=4.0, ts=1_000.0, **kw) -> str:
    return BrokerReading(run_id="run-1", source="sampler", broker=broker, lane=lane, metric=metric, value=value,
                         ts=ts, **kw).to_json().decode()


def test_broker_readings_become_their_brokers_cells_beside_the_messages(spark):
    """Readings travel with the observations: each lands in its broker's cell (the value's bin) of its lane at its
    own time, counts no message, and a bad one is excluded like a bad observation; the Python reference agrees."""
    lines = [obs(seq=0, send=1_000), reading(ts=1_500.0), reading(ts=2_500.0, value=4.01),
             reading(broker=2, lane="baseline", value=0.9, metric="request_handler_idle_ratio", ts=12_000.5),
             reading(ts=99_000.0),                                   # outside the window: left out silently
             json.dumps({"kind": "broker", "run_id": "run-1", "broker": 1}),  # fields missing
             reading(lane="purple")]
    out = job.transform(job.parse(raw(spark, lines)), bucket_ms=10_000, from_ms=0, to_ms=50_000)
    b4 = H.bin_of(4.0)
    assert b4 == H.bin_of(4.01)
    expected = spark.createDataFrame([
        ("canary", 0, "outcome.delivered", 0, 1), ("canary", 0, "partition", 0, 1), ("canary", 0, "leader", 1, 1),
        ("canary", 0, "produce_latency_ms", H.bin_of(2), 1), ("canary", 0, "e2e_latency_ms", H.bin_of(5), 1),
        ("canary", 1_500, "broker.produce_total_time_p99_ms@1", b4, 1),
        ("canary", 2_500, "broker.produce_total_time_p99_ms@1", b4, 1),
        ("baseline", 12_000, "broker.request_handler_idle_ratio@2", H.bin_of(0.9), 1),
        ("_bad", -1, "bad.malformed", 0, 1), ("_bad", 0, "bad.unknown_lane", 0, 1),
    ], "lane string, bucket_start_ms long, metric string, bin int, count long")
    assertDataFrameEqual(out, expected)
    records = [parse_record(line) for line in lines[:4]]
    reference = Aggregates.from_observations(records, 10_000)
    good = sorted(tuple(r) for r in out.collect() if r["lane"] != "_bad")
    assert good == sorted((lane, b, metric, k, c) for (lane, metric), by in reference.cells.items()
                          for b, h in by.items() for k, c in h.items())
    assert reference.broker_readings("produce_total_time_p99_ms", 0, 10_000) == {
        1_500: {1: ("canary", H.representative(b4))}, 2_500: {1: ("canary", H.representative(b4))}}
    assert reference.buckets() == [0]  # the readings' times are no time buckets


def test_the_job_calibrates_the_latencies_by_the_brokers_before_the_change(spark, tmp_path):
    """No change, broker 1 always a third slower and labelled canary: the job rolls back on it alone, and promotes
    given the same brokers' observations before the change (--before)."""
    def run_of(seconds: int, start: float) -> list[str]:
        pace = {1: 4.0, 2: 3.0, 3: 3.0}
        return [obs(lane="canary" if b == 1 else "baseline", partition=b - 1, leader=b, seq=i, send=send,
                    ack=send + pace[b] / 2, recv=send + pace[b] * (0.7 + 0.6 * (i % 10) / 9))
                for b in pace for i in range(seconds * 30) for send in [start + i * 1000 / 30]]
    window, before = tmp_path / "window.jsonl", tmp_path / "before.jsonl"
    window.write_text("\n".join(run_of(120, 1_700_000_100_000.0)) + "\n")
    before.write_text("\n".join(run_of(30, 1_700_000_000_000.0)) + "\n")
    blind = job.run(spark, AnalysisRequest(window, tmp_path / "blind", bucket_s=10.0))
    assert blind["verdict"] == "ROLLBACK", blind["reason"]
    calibrated = job.run(spark, AnalysisRequest(window, tmp_path / "calibrated", bucket_s=10.0, before=str(before)))
    assert calibrated["verdict"] == "PROMOTE", calibrated["reason"]
    assert calibrated["brokers"] == {"canary": [1], "baseline": [2, 3], "calibrated_on": [1, 2, 3]}
