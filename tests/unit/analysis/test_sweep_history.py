"""A health sweep's history file and the Spark job's history rows (summarize() → aggregates.parquet) are the same
thing: same columns and types, and either one read by the sweep's history store gives the same aggregates."""

from __future__ import annotations

import pyarrow.parquet as pq

from canary import sweep
from canary.analysis import job
from canary.judge import Aggregates
from canary.observations import Observation

COMMON = dict(run_id="sweep-x", kind="probe", source="probe-0", topic="__kafka_canary", producer_id="p")


def _observations() -> list[Observation]:
    out = []
    for seq in range(40):
        for partition, lane in ((0, "baseline"), (1, "canary")):
            send = 1_000_000 + seq * 700 + partition
            outcome = "produce_error" if seq % 13 == 5 else "delivered"
            ack, recv = (None, None) if outcome != "delivered" else (send + 2 + seq % 4, send + 5 + seq % 9)
            out.append(Observation(partition=partition, leader=partition, lane=lane, message_id=f"m{seq}", seq=seq,
                                   send_ts=send, ack_ts=ack, receive_ts=recv, outcome=outcome, **COMMON))
    return out


def test_the_sweep_store_reads_the_spark_jobs_history_rows_as_its_own(spark, tmp_path):
    obs = _observations()
    raw = spark.createDataFrame([(o.to_json().decode(),) for o in obs], "value string")
    spark_dir = tmp_path / "spark" / "aggregates.parquet"
    job.summarize(job.transform(job.parse(raw), 5000), "sweep-x").write.parquet(str(spark_dir))

    store = sweep.HistoryStore(tmp_path / "sweep")
    rows = sweep.rows_of(Aggregates.from_observations(obs, 5000))
    own = store.append(sweep.SweepRecord("sweep-x", rows, {"sweep_id": "sweep-x", "bucket_ms": 5000}))

    spark_schema = pq.ParquetDataset(spark_dir).schema
    own_schema = pq.read_schema(own)
    assert spark_schema.names == own_schema.names
    for name in spark_schema.names:
        theirs, ours = spark_schema.field(name).type, own_schema.field(name).type
        if name == "histogram":
            assert (theirs.key_type, theirs.item_type) == (ours.key_type, ours.item_type)
        else:
            assert theirs == ours, name

    (from_spark,) = sweep.HistoryStore(tmp_path / "spark").entries()  # a foreign file: no sweep metadata
    assert from_spark.meta == {}
    loaded_spark = sweep.HistoryStore(tmp_path / "spark").load(from_spark)
    (entry,) = store.entries()
    assert sorted(loaded_spark.rows) == sorted(store.load(entry).rows)
    assert loaded_spark.bucket_ms == 5000  # inferred from the bucket starts
