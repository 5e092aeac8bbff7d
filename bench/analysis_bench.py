"""Analysis cost: the canary analysis of N synthetic observations (Parquet) vs a bare Spark scan of the same data.

    .venv/bin/python bench/analysis_bench.py [--sizes 10000000 20000000] [--dir /tmp/kafka-canary-bench]

Observations: a one-hour run, 30 partitions (10 canary, 20 baseline), lognormal latencies, 0.1 % produce
errors, written once per size as Parquet (cached in --dir). For each size: the bare scan (every column
read and materialised, `noop` sink) and the whole job (parse, validate, aggregate, collect, judge, write
verdict, aggregates and report), each on a fresh local[2] session, best of --repeat runs. One untimed scan
and analysis of the smallest size go first: PySpark keeps its JVM across sessions, so without them the
first size measured would also pay for JIT compilation and a cold page cache.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pyspark.sql import SparkSession  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402

from canary.analysis import AnalysisRequest, job  # noqa: E402

START = 1_700_000_000_000
WINDOW_MS = 3_600_000


def session() -> SparkSession:
    return (SparkSession.builder.master("local[2]").appName("analysis-bench").config("spark.ui.enabled", "false")
            .config("spark.sql.shuffle.partitions", "8").config("spark.driver.memory", "4g").getOrCreate())


def generate(spark: SparkSession, n: int, path: Path) -> None:
    if (path / "_SUCCESS").exists():
        return
    i = F.col("id")
    part = (i % 30).cast("int")
    send = (F.lit(START) + (i * WINDOW_MS / n).cast("long"))
    err = F.rand(1) < 0.001
    lat = F.exp(F.lit(1.6) + 0.5 * F.randn(2))
    df = spark.range(n).select(
        F.lit("bench-run").alias("run_id"), F.lit("probe").alias("kind"), F.lit("probe-0").alias("source"),
        F.lit("__kafka_canary").alias("topic"), part.alias("partition"), (part % 3).alias("leader"),
        F.when(part < 10, "canary").otherwise("baseline").alias("lane"), F.lit("p").alias("producer_id"),
        i.cast("string").alias("message_id"), (i / 30).cast("long").alias("seq"), send.alias("send_ts"),
        F.when(err, None).otherwise(send + 2).alias("ack_ts"),
        F.when(err, None).otherwise(send + lat.cast("long")).alias("receive_ts"),
        F.when(err, "produce_error").otherwise("delivered").alias("outcome"),
        F.lit(None).cast("string").alias("error"), F.lit(None).cast("double").alias("processing_ms"),
        F.lit(None).cast("long").alias("lag"), F.lit(1).alias("schema"))
    df.write.mode("overwrite").parquet(str(path))


def bare_scan(path: Path) -> float:
    spark = session()
    try:
        start = time.monotonic()
        spark.read.parquet(str(path)).write.format("noop").mode("overwrite").save()
        return time.monotonic() - start
    finally:
        spark.stop()


def analysis(path: Path) -> tuple[float, str]:
    spark = session()
    try:
        with tempfile.TemporaryDirectory() as out:
            start = time.monotonic()
            verdict = job.run(spark, AnalysisRequest(path, out, bucket_s=10.0))
            return time.monotonic() - start, verdict["verdict"]
    finally:
        spark.stop()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[10_000_000, 20_000_000])
    p.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()) / "kafka-canary-bench")
    p.add_argument("--repeat", type=int, default=2)
    args = p.parse_args(argv)
    spark = session()
    try:
        for n in args.sizes:
            generate(spark, n, args.dir / f"obs-{n}")
    finally:
        spark.stop()
    warm = args.dir / f"obs-{min(args.sizes)}"
    bare_scan(warm), analysis(warm)
    rows = []
    for n in args.sizes:
        path = args.dir / f"obs-{n}"
        scan = min(bare_scan(path) for _ in range(args.repeat))
        runs = [analysis(path) for _ in range(args.repeat)]
        best = min(t for t, _ in runs)
        rows.append((n, scan, best, runs[0][1]))
        print(f"{n:>12,} observations: bare scan {scan:6.1f} s, analysis {best:6.1f} s, "
              f"ratio {best / scan:4.2f}x, verdict {runs[0][1]}", flush=True)
    if len(rows) > 1:
        (n1, _, t1, _), (n2, _, t2, _) = rows[0], rows[-1]
        print(f"linearity: {n2:,} / {n1:,} observations took {t2 / t1:.2f}x the time ({n2 / n1:.1f}x the data)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
