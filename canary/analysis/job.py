"""The canary analysis as a Spark job: one run's observations -> per lane × metric × time bucket aggregates ->
the judge.

    spark-submit spark_jobs/canary_analysis.py --observations SOURCE [--from T --to T] --out DIR
                 [--config judge.yaml] [--run-id ID] [--interim] [--master URL]

(`kafka-canary analyze` submits the same job through resources/canary_analysis.py, shipped in this package.)

SOURCE is a Parquet or JSON-lines file/directory (archive, replay) or `kafka://HOST:PORT[,HOST:PORT][/TOPIC]`
(the observations topic, read by record timestamp between --from and --to; needs the Kafka source jars,
which `kafka-canary analyze` resolves from Maven Central and passes with --jars). T is epoch milliseconds or
an ISO-8601 time. Writes DIR/verdict.json, DIR/aggregates.parquet (history for health sweeps) and
DIR/report.html with its PNGs. Exit code: 0 PROMOTE, 1 ROLLBACK, 3 INCONCLUSIVE, 2 error.

extract -> parse/validate -> transform (pure) -> load, as in Spark's testing guide. `main` builds the
SparkSession; everything else takes one.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from canary.analysis.inline import calibration
from canary.analysis.request import AnalysisRequest, add_arguments
from canary.analysis.result import summary
from canary.errors import CanaryError
from canary.judge import Aggregates, Brief, judge, load_config
from canary.judge import histogram as H
from canary.judge.aggregates import BAD_LANE, BAD_PREFIX, BROKER_PREFIX, OUTCOME_PREFIX
from canary.observations import (
    BROKER_KIND,
    FUTURE_SLACK_MS,
    LANES,
    MAX_RECORD_BYTES,
    OBSERVATIONS_TOPIC,
    OUTCOMES,
    SCHEMA_VERSION,
)
from canary.outcome import Outcome

OBSERVATION_SCHEMA = T.StructType([
    T.StructField("run_id", T.StringType()), T.StructField("kind", T.StringType()),
    T.StructField("source", T.StringType()), T.StructField("topic", T.StringType()),
    T.StructField("partition", T.IntegerType()), T.StructField("leader", T.IntegerType()),
    T.StructField("lane", T.StringType()), T.StructField("producer_id", T.StringType()),
    T.StructField("message_id", T.StringType()), T.StructField("seq", T.LongType()),
    T.StructField("send_ts", T.DoubleType()), T.StructField("ack_ts", T.DoubleType()),
    T.StructField("receive_ts", T.DoubleType()), T.StructField("outcome", T.StringType()),
    T.StructField("error", T.StringType()), T.StructField("processing_ms", T.DoubleType()),
    T.StructField("lag", T.LongType()), T.StructField("outputs", T.LongType()),
    T.StructField("schema", T.IntegerType()),
    # broker readings (canary.observations.BrokerReading, kind "broker")
    T.StructField("broker", T.IntegerType()), T.StructField("metric", T.StringType()),
    T.StructField("value", T.DoubleType()), T.StructField("ts", T.DoubleType()),
])
REQUIRED = ("run_id", "partition", "lane", "send_ts", "outcome", "schema")
READING_REQUIRED = ("run_id", "source", "broker", "lane", "metric", "value", "ts", "schema")
HISTOGRAMS = ("e2e_latency_ms", "produce_latency_ms", "processing_ms", "lag", "outputs")
AGGREGATE_COLUMNS = ("lane", "bucket_start_ms", "metric", "bin", "count")


# ----- extract -----

def extract(spark: SparkSession, source: str, from_ms: int | None = None, to_ms: int | None = None) -> DataFrame:
    """Raw observations: a DataFrame with one JSON string column `value` (JSON files, Kafka) or the typed
    observation columns (Parquet)."""
    if source.startswith("kafka://"):
        servers, _, topic = source.removeprefix("kafka://").partition("/")
        reader = (spark.read.format("kafka").option("kafka.bootstrap.servers", servers)
                  .option("subscribe", topic or OBSERVATIONS_TOPIC))
        # Record timestamps are the producers' send times; a small margin catches late records. The end of the
        # window is applied to send_ts in transform(): an endingTimestamp past a partition's last record fails.
        if from_ms is not None:
            reader = (reader.option("startingTimestamp", str(max(0, from_ms - 60_000)))
                      .option("startingOffsetsByTimestampStrategy", "latest"))
        return reader.load().select(F.col("value").cast("string").alias("value"))
    path = Path(source)
    if not path.exists():
        raise CanaryError(f"observations {source} do not exist")
    if source.endswith(".parquet") or any(path.glob("*.parquet")):
        return spark.read.parquet(source)
    # A blank line of a JSON-lines file is no record (the inline judge's reader skips it too).
    return spark.read.text(source).select(F.col("value")).where(F.trim("value") != "")


# ----- transform (pure) -----

def parse(raw: DataFrame, now_ms: int | None = None) -> DataFrame:
    """Typed observations plus `bad_reason` (null when the observation is usable). Takes the JSON `value`
    column or already typed columns (Parquet); never raises on bad records. With `now_ms`, a time later than
    now_ms + FUTURE_SLACK_MS is `future_timestamp`; a JSON record over MAX_RECORD_BYTES is `oversize` (not parsed)."""
    oversize = F.lit(False)
    if "value" in raw.columns and "send_ts" not in raw.columns:
        oversize = F.coalesce(F.octet_length("value") > MAX_RECORD_BYTES, F.lit(False))
        parsed = raw.select(F.when(~oversize, F.from_json("value", OBSERVATION_SCHEMA)).alias("o"),
                            oversize.alias("_oversize")).select("o.*", "_oversize")
        oversize = F.col("_oversize")
    else:
        parsed = raw.select(*[(F.col(f.name) if f.name in raw.columns else F.lit(None)).cast(f.dataType).alias(f.name)
                              for f in OBSERVATION_SCHEMA.fields])
    reading = F.coalesce(F.col("kind") == BROKER_KIND, F.lit(False))
    missing = F.lit(False)
    for name in REQUIRED:
        missing = missing | F.col(name).isNull()
    missing_reading = F.lit(False)
    for name in READING_REQUIRED:
        missing_reading = missing_reading | F.col(name).isNull()
    missing = F.when(reading, missing_reading).otherwise(missing)
    # A reading's time is when it was read: windows and buckets select it by that, as an observation by its send.
    parsed = parsed.withColumn("send_ts", F.when(reading, F.col("ts")).otherwise(F.col("send_ts")))
    future = F.lit(False)
    if now_ms is not None:
        latest = F.greatest(F.col("send_ts"), F.col("ack_ts"), F.col("receive_ts"))
        future = F.coalesce(latest > now_ms + FUTURE_SLACK_MS, F.lit(False))
    reason = (F.when(oversize, "oversize")
              .when(missing, "malformed")
              .when(F.col("schema") != SCHEMA_VERSION, "schema_version")
              .when(~F.col("lane").isin(*LANES), "unknown_lane")
              .when(~reading & ~F.col("outcome").isin(*OUTCOMES), "unknown_outcome")
              .when(future, "future_timestamp")
              .when((F.col("receive_ts") < F.col("send_ts")) | (F.col("ack_ts") < F.col("send_ts")), "clock_skew"))
    return parsed.withColumn("bad_reason", reason).drop("_oversize")


def _bin(x):
    return F.when(x.isNull(), None).when(x < H.UNIT, 0).otherwise(
        (F.floor(F.log(x / H.UNIT) / H.LN_BASE) + 1).cast("int"))


def _in_scope(obs: DataFrame, from_ms: int | None, to_ms: int | None, run_id: str | None) -> DataFrame:
    """The observations of run `run_id` sent in [from_ms, to_ms) (a None bound: none), and those no window or run
    can claim (no run id, no send time, a time in the future), which transform counts as excluded."""
    in_scope = F.lit(True)
    no_window = F.col("send_ts").isNull() | F.coalesce(F.col("bad_reason") == "future_timestamp", F.lit(False))
    if from_ms is not None:
        in_scope &= no_window | (F.col("send_ts") >= from_ms)
    if to_ms is not None:
        in_scope &= no_window | (F.col("send_ts") < to_ms)
    if run_id is not None:
        in_scope &= F.col("run_id").isNull() | (F.col("run_id") == run_id)
    return obs.where(in_scope)


def transform(obs: DataFrame, bucket_ms: int, from_ms: int | None = None, to_ms: int | None = None,
              run_id: str | None = None) -> DataFrame:
    """Per lane × time bucket × metric × histogram bin counts (columns AGGREGATE_COLUMNS).

    metric `outcome.<o>` (bin 0) counts outcomes, `partition` (bin = partition) the partitions a lane used,
    `leader` (bin = broker id) the brokers that led them,
    the HISTOGRAMS sources their log-spaced bins (canary.judge.histogram), a broker reading its broker's cell
    (`broker.<metric>@<broker>`, the value's bin, at the reading's own time). Excluded observations become
    lane `_bad`, metric `bad.<reason>`, bucket -1 when their time is unknown. Observations sent outside
    [from_ms, to_ms) or of another run are left out silently (they belong to other windows and runs), except
    those whose time is in the future: no window holds them, so they are counted here."""
    obs = _in_scope(obs, from_ms, to_ms, run_id)
    reading = F.coalesce(F.col("kind") == BROKER_KIND, F.lit(False))
    # A broker reading keeps its own time (ms) as its key: the judge compares the brokers reading by reading.
    bucket = F.when(reading & F.col("bad_reason").isNull(), F.floor(F.col("send_ts"))).otherwise(
        F.floor(F.col("send_ts") / bucket_ms) * bucket_ms).cast("long")
    values = {
        "e2e_latency_ms": (F.col("receive_ts") - F.col("send_ts")).cast("double"),
        "produce_latency_ms": (F.col("ack_ts") - F.col("send_ts")).cast("double"),
        "processing_ms": F.col("processing_ms"),
        "lag": F.col("lag").cast("double"),
        "outputs": F.col("outputs").cast("double"),
    }
    good = F.col("bad_reason").isNull()
    message = good & ~reading
    # Stage 1, one pass over the observations: count them by every key at once (lane, bucket, partition,
    # outcome and each histogram's bin, or the reason an observation is excluded). Latencies fall into few
    # histogram bins, so the combinations are few and the map-side aggregation shrinks the data before any
    # shuffle, where splitting each observation into one row per metric first would multiply it by six.
    keys = [F.when(good, F.col("lane")).alias("lane"),
            F.coalesce(bucket, F.lit(-1).cast("long")).alias("bucket_start_ms"),
            F.when(message, F.col("partition")).alias("partition"),
            F.when(message, F.col("leader")).alias("leader"),
            F.when(message, F.col("outcome")).alias("outcome"), F.col("bad_reason"),
            F.when(good & reading, F.concat(F.lit(BROKER_PREFIX), F.col("metric"), F.lit("@"),
                                            F.col("broker").cast("string"))).alias("reading"),
            F.when(good & reading, _bin(F.col("value"))).alias("reading_bin")]
    keys += [F.when(message, _bin(value)).alias(name) for name, value in values.items()]
    combined = obs.groupBy(*keys).agg(F.count(F.lit(1)).alias("n"))
    # Stage 2, on the combinations only: one row per metric and bin, summed.
    cells = [F.struct(F.concat(F.lit(OUTCOME_PREFIX), F.col("outcome")).alias("metric"), F.lit(0).alias("bin")),
             F.struct(F.lit("partition").alias("metric"), F.col("partition").alias("bin")),
             F.struct(F.lit("leader").alias("metric"), F.col("leader").alias("bin"))]
    cells += [F.struct(F.lit(name).alias("metric"), F.col(name).alias("bin")) for name in values]
    cells += [F.struct(F.col("reading").alias("metric"), F.col("reading_bin").alias("bin"))]
    good_rows = (combined.where(F.col("bad_reason").isNull())
                 .select("lane", "bucket_start_ms", "n", F.explode(F.array(*cells)).alias("c"))
                 .where(F.col("c.bin").isNotNull() & F.col("c.metric").isNotNull())
                 .select("lane", "bucket_start_ms", "c.metric", "c.bin", "n"))
    bad_rows = combined.where(F.col("bad_reason").isNotNull()).select(
        F.lit(BAD_LANE).alias("lane"), "bucket_start_ms",
        F.concat(F.lit(BAD_PREFIX), F.col("bad_reason")).alias("metric"), F.lit(0).alias("bin"), "n")
    return (good_rows.unionByName(bad_rows).groupBy("lane", "bucket_start_ms", "metric", "bin")
            .agg(F.sum("n").alias("count")))


def summarize(aggregates: DataFrame, run_label: str) -> DataFrame:
    """History rows: one per lane × metric × bucket with the total count and the histogram as a map."""
    return (aggregates.where(F.col("lane") != BAD_LANE)
            .groupBy("lane", "metric", "bucket_start_ms")
            .agg(F.sum("count").alias("count"),
                 F.map_from_entries(F.collect_list(F.struct("bin", "count"))).alias("histogram"))
            .withColumn("run", F.lit(run_label)))


# ----- load -----

def load(spark: SparkSession, aggregates: DataFrame, out: Path, config_path: str | None, bucket_ms: int,
         final: bool, before: str | None = None) -> dict:
    # The aggregates are small (lanes x buckets x bins) and feed both the judge and the history: kept in
    # memory once rather than computed twice from the observations or shipped back from Python.
    aggregates = aggregates.cache()
    try:
        rows = [tuple(r) for r in aggregates.collect()]
        agg = Aggregates.from_rows(rows, bucket_ms)
        config = load_config(config_path)
        verdict = judge(agg, config, final=final, before=calibration(before))
        out.mkdir(parents=True, exist_ok=True)
        (out / "verdict.json").write_text(json.dumps(verdict, indent=2, default=float))
        summarize(aggregates, out.name).write.mode("overwrite").parquet(str(out / "aggregates.parquet"))
    finally:
        aggregates.unpersist()
    from canary.judge.report import write_report

    write_report(out, verdict, agg)
    return verdict


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="canary_analysis", description=__doc__.split("\n\n")[0])
    add_arguments(p)
    p.add_argument("--bucket-s", type=float, help="time bucket (default: the judge config's bucket_s)")
    p.add_argument("--master", default=None, help="Spark master (default: spark-submit's, else local[2])")
    return p


def run(spark: SparkSession, request: AnalysisRequest) -> dict:
    """The analysis of `request` on `spark`: writes the verdict, the aggregates and the report; returns the
    verdict."""
    from_ms, to_ms = request.from_ms, request.to_ms
    bucket_ms = int(1000 * (request.bucket_s or load_config(request.config).bucket_s))
    observations = parse(extract(spark, request.observations, from_ms, to_ms), now_ms=int(time.time() * 1000))
    aggregates = transform(observations, bucket_ms, from_ms, to_ms, request.run_id)
    return load(spark, aggregates, request.out, request.config, bucket_ms, final=not request.interim,
                before=request.before)


def main(argv: list[str] | None = None) -> int:
    """The job's program: the exit code is the verdict (0 PROMOTE, 1 ROLLBACK, 3 INCONCLUSIVE), 2 an error (one
    line on stderr)."""
    args = build_parser().parse_args(argv)
    try:
        request = AnalysisRequest.from_args(args)
    except CanaryError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    builder = SparkSession.builder.appName("kafka-canary-analysis")
    if args.master:
        builder = builder.master(args.master)
    spark = builder.config("spark.sql.shuffle.partitions", "8").config("spark.ui.enabled", "false").getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    try:
        verdict = run(spark, request)
    except Exception as exc:  # one line for the user and exit 2; Spark has logged the details
        print(f"error: analysis failed: {exc}", file=sys.stderr)
        return Outcome.ERROR.exit_code
    finally:
        spark.stop()
    print(summary(verdict))
    print(f"wrote {request.out}/verdict.json, aggregates.parquet, report.html")
    return Brief.of(verdict).outcome.exit_code


if __name__ == "__main__":
    sys.exit(main())
