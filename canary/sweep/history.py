"""A cluster's sweep history: one sweep's aggregates as rows (SweepRecord) and the store that keeps them,
`<root>/<cluster>/<sweep id>.parquet`, one file per sweep. The rows are those canary.analysis.job.summarize()
writes (lane, metric, bucket_start_ms, count, histogram, run); the sweep's settings, verdict and summary are in the
file's key-value metadata (`kafka_canary.sweep`)."""

from __future__ import annotations

import json
import logging
import os
import shutil
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from canary.judge import Aggregates
from canary.observations import LANES

log = logging.getLogger("canary.sweep")

HISTORY_SCHEMA = "kafka-canary/sweep-history"
SCHEMA_VERSION = 1
META_KEY = b"kafka_canary.sweep"

Row = tuple[str, int, str, int, int]  # lane, bucket_start_ms, metric, bin, count


@dataclass
class SweepRecord:
    """One sweep's aggregates as the history keeps them: rows and the sweep's metadata (settings, window,
    verdict, summary)."""

    sweep_id: str
    rows: list[Row]
    meta: dict

    @property
    def bucket_ms(self) -> int:
        return int(self.meta["bucket_ms"])

    def buckets(self) -> list[int]:
        return sorted({bucket for lane, bucket, *_ in self.rows if lane in LANES})

    def full_buckets(self) -> list[int]:
        """The buckets the probe sent in from their first to their last millisecond. Without the send window
        (a file the sweep did not write) the first and last bucket are left out."""
        buckets = self.buckets()
        first, last = self.meta.get("first_send_ms"), self.meta.get("last_send_ms")
        if first is None or last is None:
            return buckets[1:-1]
        return [bucket for bucket in buckets if bucket >= first and bucket + self.bucket_ms <= last]

    def judged_rows(self) -> list[Row]:
        """The rows of the full buckets: what the guards and the comparison judge (the probe's start-up, in the
        first and partial bucket, is not), and what the trend shows. All rows when no bucket is full."""
        full = set(self.full_buckets())
        return [row for row in self.rows if row[1] in full] or list(self.rows)


def rows_of(agg: Aggregates) -> list[Row]:
    """The judge's aggregates as history rows, sorted."""
    return sorted((lane, int(bucket), metric, int(hist_bin), int(count))
                  for (lane, metric), by_bucket in agg.cells.items()
                  for bucket, hist in by_bucket.items() for hist_bin, count in hist.items())


def parquet_schema():
    """The Spark job's history rows: summarize()'s columns and types (map<int, bigint> histogram). A function:
    pyarrow is imported only when history is read or written."""
    import pyarrow as pa

    return pa.schema([("lane", pa.string()), ("metric", pa.string()), ("bucket_start_ms", pa.int64()),
                      ("count", pa.int64()), ("histogram", pa.map_(pa.int32(), pa.int64())), ("run", pa.string())])


@dataclass(frozen=True)
class HistoryEntry:
    path: Path
    meta: dict

    @property
    def sweep_id(self) -> str:
        return self.meta.get("sweep_id") or self.path.stem

    @property
    def verdict(self) -> str | None:
        return self.meta.get("verdict")


class HistoryStore:
    """`<root>/<cluster>/<sweep id>.parquet`, one file per sweep (also readable: a Spark job's aggregates.parquet
    directory copied in under another name)."""

    def __init__(self, directory: Path):
        self.directory = Path(directory)

    @property
    def reports(self) -> Path:
        return self.directory / "reports"

    def entries(self) -> list[HistoryEntry]:
        """Every sweep in the store, oldest first (metadata only: Parquet footers)."""
        import pyarrow.parquet as pq

        found = []
        for path in self.directory.glob("*.parquet"):
            try:
                schema = pq.read_schema(path) if path.is_file() else pq.ParquetDataset(path).schema
            except (OSError, ValueError) as exc:  # a half-copied or foreign file must not stop the sweep
                log.warning("history file %s is unreadable, skipped: %s", path, exc)
                continue
            meta = json.loads((schema.metadata or {}).get(META_KEY, b"{}"))
            found.append(HistoryEntry(path, meta))
        return sorted(found, key=lambda entry: (entry.meta.get("started_ms") or 0, entry.sweep_id))

    def load(self, entry: HistoryEntry) -> SweepRecord:
        import pyarrow.parquet as pq

        table = pq.read_table(entry.path, columns=["lane", "metric", "bucket_start_ms", "histogram"])
        lanes, metrics, buckets, hists = (table.column(name).to_pylist() for name in table.column_names)
        rows = [(lane, int(bucket), metric, int(hist_bin), int(count))
                for lane, metric, bucket, hist in zip(lanes, metrics, buckets, hists, strict=True)
                for hist_bin, count in (hist or [])]
        meta = dict(entry.meta)
        if "bucket_ms" not in meta:
            starts = sorted({row[1] for row in rows})
            meta["bucket_ms"] = min((b - a for a, b in zip(starts, starts[1:], strict=False)), default=5000)
        return SweepRecord(entry.sweep_id, rows, meta)

    def append(self, record: SweepRecord) -> Path:
        """Writes the sweep's file atomically (a reader never sees half of it)."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        grouped: dict[tuple[str, str, int], dict[int, int]] = defaultdict(dict)
        for lane, bucket, metric, hist_bin, count in record.rows:
            if lane in LANES:  # as summarize(): excluded observations are not history
                hist = grouped[(lane, metric, bucket)]
                hist[hist_bin] = hist.get(hist_bin, 0) + count
        keys = sorted(grouped)
        table = pa.table({
            "lane": [key[0] for key in keys], "metric": [key[1] for key in keys],
            "bucket_start_ms": [key[2] for key in keys], "count": [sum(grouped[key].values()) for key in keys],
            "histogram": [sorted(grouped[key].items()) for key in keys], "run": [record.sweep_id] * len(keys),
        }, schema=parquet_schema()).replace_schema_metadata({META_KEY: json.dumps(record.meta)})
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.directory / f"{record.sweep_id}.parquet"
        tmp = path.with_name(f".{path.name}.tmp")
        pq.write_table(table, tmp)
        os.replace(tmp, path)
        return path

    def prune(self, keep: int) -> list[str]:
        """Removes the oldest sweeps beyond `keep`, with their report directories; returns their ids."""
        old = self.entries()[:-keep]
        for entry in old:
            if entry.path.is_dir():
                shutil.rmtree(entry.path, ignore_errors=True)
            else:
                entry.path.unlink(missing_ok=True)
            shutil.rmtree(self.reports / entry.sweep_id, ignore_errors=True)
        return [entry.sweep_id for entry in old]
