"""Scheduled health sweeps (DESIGN.md §1): probe one cluster for a short while, compare what the probe saw with
that cluster's history, decide HEALTHY, DEGRADED or INCONCLUSIVE, and keep the history and its trend.

    result = run_sweep(SweepConfig(bootstrap_servers="kafka-1:9092", cluster_name="prod-eu"))

One sweep:

1. **probe** — the canary probe for `duration` (default 30 s) with run id `sweep-<sweep id>`; its observations go
   to the cluster's observations topic as always and to `<out>/observations.jsonl`. While a rollout holds the
   cluster's lock the probe only reads the canary topic (no reconciling: the rollout alone changes the cluster)
   and the sweep is never used as a reference later.
2. **aggregate** — observations → counts per lane × time bucket × metric × histogram bin (the judge's
   `Aggregates`, buckets aligned as the Spark job aligns them).
3. **compare** — this sweep against the *reference*: the last `reference_sweeps` HEALTHY sweeps of the cluster
   taken with the same probe settings, pooled. The judge compares them as two lanes, this sweep as `canary` and
   the reference as `baseline`, bucket by bucket: the k-th full time bucket of this sweep against the k-th full
   buckets of the reference sweeps (the judge's tests are conditional per bucket). Apart from that the judge's
   own machinery decides: tests, floors, data sufficiency, the loss tolerance. The judge's absolute SLO guards
   are checked on this sweep alone (a breach in the history must not fail today's sweep). Both judge the full
   buckets only: the first, partial one holds the probe's start-up. The first sweep of a cluster has no
   reference: the SLO guards alone judge it, and its reason says so.
4. **decide** — DEGRADED when an SLO guard is breached or the comparison finds a regression (the judge's
   ROLLBACK); INCONCLUSIVE when the data do not suffice (the judge's INCONCLUSIVE); else HEALTHY.
5. **keep** — the sweep's aggregates appended to the history store: one Parquet file per sweep,
   `<history root>/<cluster>/<sweep id>.parquet`, rows as spark_jobs/canary_analysis.summarize() writes them
   (lane, metric, bucket_start_ms, count, histogram, run), the sweep's settings, verdict and summary in the
   file's key-value metadata (`kafka_canary.sweep`). The oldest files beyond `keep_history` are removed.
6. **report** — `<out>/result.json`, `<out>/report.html`, the trend of the last `trend_sweeps` sweeps
   (`trend.json`, `trend.png`: p99 latencies, error and loss rates, availability per sweep; also copied to
   `<history root>/<cluster>/`), and the judge's own report of the comparison in `<out>/comparison/`.

A sweep compares before with after, which the rollout gate never does (its lanes run side by side), so drift
between sweeps (load, a noisy neighbour) is not cancelled: the sweep's latency floors are wider
(`SWEEP_JUDGE`, merged under any judge config given). Alpha: the comparison gets alpha × (1 − SLO_SHARE), the
guards the judge's SLO share of alpha, so one sweep's false-alarm chance stays within alpha.

`kafka-canary sweep …` runs one sweep from the command line (exit 0 healthy, 1 degraded, 3 inconclusive,
2 error); the Airflow DAG `kafka_health_sweep` runs one per registered cluster every hour.
"""

from __future__ import annotations

import argparse
import base64
import html
import io
import json
import logging
import os
import re
import shutil
import socket
import sys
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path

from canary.errors import CanaryError
from canary.judge import INCONCLUSIVE, PROMOTE, ROLLBACK, Aggregates, JudgeConfig, judge
from canary.judge import histogram as H
from canary.judge.config import FAILURES, config_from_dict
from canary.judge.core import OUTCOME_PREFIX, SLO_SHARE
from canary.observations import LANES

log = logging.getLogger("canary.sweep")

HEALTHY, DEGRADED = "HEALTHY", "DEGRADED"
EXIT_CODES = {HEALTHY: 0, DEGRADED: 1, INCONCLUSIVE: 3}
HISTORY_ENV = "KAFKA_CANARY_HISTORY"
DEFAULT_HISTORY = "~/.local/state/kafka-canary/history"
WEBHOOK_ENV = "KAFKA_CANARY_ALERT_WEBHOOK"
RESULT_SCHEMA = "kafka-canary/sweep-result"
HISTORY_SCHEMA = "kafka-canary/sweep-history"
SCHEMA_VERSION = 1
META_KEY = b"kafka_canary.sweep"
# The reference's partitions are renumbered per reference sweep, so the judge's exposure (distinct partitions per
# bucket × bucket length) counts each pooled sweep's partitions once, as throughput needs.
PARTITION_STRIDE = 1_000_000

# Latency floors for a before/after comparison (hours apart, no lane running alongside to cancel drift): a
# regression must double p99 and add 25 ms to count. No warm-up bucket (the comparison only uses full buckets,
# which start after the probe's first messages) and two analysed buckets suffice for a 15-30 s sweep.
_DOUBLED = {"rel_floor": 1.0, "abs_floor": 25.0}
SWEEP_JUDGE: dict = {"warmup_s": 0, "bucket_s": 5, "min_buckets": 2, "metrics": {
    "e2e_latency_p50": {"rel_floor": 0.5, "abs_floor": 5.0},
    "e2e_latency_p95": {"rel_floor": 0.5, "abs_floor": 10.0},
    "e2e_latency_p99": _DOUBLED,
    "produce_latency_p99": _DOUBLED,
}}

Row = tuple[str, int, str, int, int]  # lane, bucket_start_ms, metric, bin, count


class SweepError(CanaryError):
    """A sweep cannot run as asked; the message says what to fix."""


def history_root() -> Path:
    """$KAFKA_CANARY_HISTORY, else ~/.local/state/kafka-canary/history."""
    return Path(os.environ.get(HISTORY_ENV) or DEFAULT_HISTORY).expanduser()


def cluster_key(name: str) -> str:
    """A cluster name as a directory name: [A-Za-z0-9._-], not starting with a dot."""
    key = re.sub(r"[^A-Za-z0-9._-]", "_", name.strip()).lstrip(".")
    if not key:
        raise SweepError(f"cluster name {name!r} has no usable character; pass --cluster-name")
    return key[:120]


def sweep_judge_config(overrides: dict | str | Path | None = None) -> JudgeConfig:
    """SWEEP_JUDGE with `overrides` (a judge config mapping or YAML file, canary/judge/README.md) merged over it;
    a metric named in both gets the fields of both, the override's winning."""
    import yaml

    data = overrides
    if isinstance(overrides, str | Path):
        try:
            data = yaml.safe_load(Path(overrides).read_text()) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise SweepError(f"cannot read judge config {overrides}: {exc}") from exc
    if not isinstance(data or {}, dict):
        raise SweepError(f"judge config must be a mapping (canary/judge/README.md), got {type(data).__name__}")
    data = dict(data or {})
    if not all(isinstance(v, dict) for v in (data.get("metrics") or {}).values()):
        raise SweepError("judge config: every metric must be a mapping of fields")
    metrics = {name: dict(fields) for name, fields in SWEEP_JUDGE["metrics"].items()}
    for name, fields in (data.pop("metrics", None) or {}).items():
        metrics[name] = metrics.get(name, {}) | fields
    return config_from_dict({k: v for k, v in SWEEP_JUDGE.items() if k != "metrics"} | data | {"metrics": metrics})


@dataclass(frozen=True)
class SweepConfig:
    """One cluster's sweep. `client`: librdkafka settings (security) passed to the probe untouched. `judge`: a
    judge config mapping or YAML path merged over SWEEP_JUDGE. `out`: where result.json and the report go
    (default `<history root>/<cluster>/reports/<sweep id>`)."""

    bootstrap_servers: str
    cluster_name: str | None = None            # default: the bootstrap servers
    client: dict[str, str] = field(default_factory=dict)
    duration: float = 30.0                     # seconds of probe traffic
    rate: float = 20.0                         # probe messages per second per partition
    message_size: int = 200
    topic: str = "__kafka_canary"
    judge: dict | str | None = None
    reference_sweeps: int = 6                  # healthy sweeps pooled as the reference
    trend_sweeps: int = 48                     # sweeps shown in the trend
    keep_history: int = 2000                   # history files kept per cluster (about 12 weeks hourly)
    history: Path | None = None                # default: history_root()
    out: Path | None = None
    keep_observations: bool = False            # keep <out>/observations.jsonl (it is also on the cluster)

    def __post_init__(self) -> None:
        if not self.bootstrap_servers:
            raise SweepError("bootstrap servers are missing: pass --bootstrap-servers host:port[,host:port]")
        if not 1 <= self.duration <= 3600:
            raise SweepError(f"duration must be 1 s .. 1 h, got {self.duration:g} s")
        if self.rate <= 0:
            raise SweepError(f"rate must be > 0 messages/s per partition, got {self.rate:g}")
        for name in ("reference_sweeps", "trend_sweeps", "keep_history"):
            if getattr(self, name) < 1:
                raise SweepError(f"{name} must be at least 1, got {getattr(self, name)}")
        cluster_key(self.cluster_name or self.bootstrap_servers)

    @property
    def cluster(self) -> str:
        return cluster_key(self.cluster_name or self.bootstrap_servers)

    @property
    def history_dir(self) -> Path:
        return Path(self.history or history_root()).expanduser() / self.cluster

    def judge_config(self) -> JudgeConfig:
        return sweep_judge_config(self.judge)


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
        return sorted({r[1] for r in self.rows if r[0] in LANES})

    def full_buckets(self) -> list[int]:
        """The buckets the probe sent in from their first to their last millisecond. Without the send window
        (a file the sweep did not write) the first and last bucket are left out."""
        buckets = self.buckets()
        first, last = self.meta.get("first_send_ms"), self.meta.get("last_send_ms")
        if first is None or last is None:
            return buckets[1:-1]
        return [b for b in buckets if b >= first and b + self.bucket_ms <= last]

    def judged_rows(self) -> list[Row]:
        """The rows of the full buckets: what the guards and the comparison judge (the probe's start-up, in the
        first and partial bucket, is not), and what the trend shows. All rows when no bucket is full."""
        full = set(self.full_buckets())
        return [r for r in self.rows if r[1] in full] or list(self.rows)


def rows_of(agg: Aggregates) -> list[Row]:
    return sorted((lane, int(bucket), metric, int(b), int(c)) for (lane, metric), by in agg.cells.items()
                  for bucket, hist in by.items() for b, c in hist.items())


# ----- the history store -----

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
        return sorted(found, key=lambda e: (e.meta.get("started_ms") or 0, e.sweep_id))

    def load(self, entry: HistoryEntry) -> SweepRecord:
        import pyarrow.parquet as pq

        table = pq.read_table(entry.path, columns=["lane", "metric", "bucket_start_ms", "histogram"])
        lanes, metrics, buckets, hists = (table.column(c).to_pylist() for c in table.column_names)
        rows = [(lane, int(bucket), metric, int(b), int(c))
                for lane, metric, bucket, hist in zip(lanes, metrics, buckets, hists, strict=True)
                for b, c in (hist or [])]
        meta = dict(entry.meta)
        if "bucket_ms" not in meta:
            starts = sorted({r[1] for r in rows})
            meta["bucket_ms"] = min((b - a for a, b in zip(starts, starts[1:], strict=False)), default=5000)
        return SweepRecord(entry.sweep_id, rows, meta)

    def append(self, record: SweepRecord) -> Path:
        """Writes the sweep's file atomically (a reader never sees half of it)."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        grouped: dict[tuple[str, str, int], dict[int, int]] = defaultdict(dict)
        for lane, bucket, metric, b, c in record.rows:
            if lane in LANES:  # as summarize(): excluded observations are not history
                hist = grouped[(lane, metric, bucket)]
                hist[b] = hist.get(b, 0) + c
        keys = sorted(grouped)
        table = pa.table({
            "lane": [k[0] for k in keys], "metric": [k[1] for k in keys],
            "bucket_start_ms": [k[2] for k in keys], "count": [sum(grouped[k].values()) for k in keys],
            "histogram": [sorted(grouped[k].items()) for k in keys], "run": [record.sweep_id] * len(keys),
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
        return [e.sweep_id for e in old]


def parquet_schema():
    """The Spark job's history rows: summarize()'s columns and types (map<int, bigint> histogram). A function:
    pyarrow is imported only when history is read or written."""
    import pyarrow as pa

    return pa.schema([("lane", pa.string()), ("metric", pa.string()), ("bucket_start_ms", pa.int64()),
                      ("count", pa.int64()), ("histogram", pa.map_(pa.int32(), pa.int64())), ("run", pa.string())])


def comparable(meta: dict, current: dict) -> bool:
    """Probe settings that shape the numbers must match for two sweeps to be compared."""
    return all(meta.get(k) == current.get(k) for k in ("bucket_ms", "rate", "message_size"))


def select_reference(entries: Iterable[HistoryEntry], current: dict, count: int) -> list[HistoryEntry]:
    """The newest `count` sweeps that may serve as the reference: HEALTHY, comparable settings, not taken
    during a rollout. A DEGRADED sweep never becomes the reference, so a lasting degradation keeps alerting
    (to accept a new normal, remove the degraded sweeps' files)."""
    eligible = [e for e in entries if e.verdict == HEALTHY and not e.meta.get("during_rollout")
                and comparable(e.meta, current) and e.sweep_id != current.get("sweep_id")]
    return eligible[-count:]


# ----- comparison -----

def comparison_aggregates(current: SweepRecord, reference: list[SweepRecord]) -> Aggregates:
    """This sweep as the `canary` lane, the pooled reference as `baseline`, on this sweep's full buckets: the
    k-th full bucket of every reference sweep lands in the k-th full bucket of this one (reference buckets
    beyond this sweep's length are left out). Both lanes of each sweep are pooled."""
    bucket_ms = current.bucket_ms
    mine = current.full_buckets()
    origin = mine[0] if mine else 0
    rows: list[Row] = []
    index = {b: i for i, b in enumerate(mine)}
    for lane, bucket, metric, b, c in current.rows:
        if lane in LANES and bucket in index:
            rows.append(("canary", origin + index[bucket] * bucket_ms, metric, b, c))
    for k, ref in enumerate(reference, start=1):
        theirs = {b: i for i, b in enumerate(ref.full_buckets()[:len(mine)])}
        for lane, bucket, metric, b, c in ref.rows:
            if lane in LANES and bucket in theirs:
                b = b + k * PARTITION_STRIDE if metric == "partition" else b
                rows.append(("baseline", origin + theirs[bucket] * bucket_ms, metric, b, c))
    return Aggregates.from_rows(rows, bucket_ms, [current.meta.get("probe_run_id") or current.sweep_id,
                                                  *(r.sweep_id for r in reference)])


def guard_aggregates(current: SweepRecord) -> Aggregates:
    """This sweep's full buckets in both lanes: the judge's SLO guards then test this sweep alone, and its lane
    comparison, of identical lanes, cannot find anything."""
    full = set(current.full_buckets())
    rows = [(lane, bucket, metric, b, c) for seen_in, bucket, metric, b, c in current.rows
            if seen_in in LANES and bucket in full for lane in LANES]
    return Aggregates.from_rows(rows, current.bucket_ms, [current.meta.get("probe_run_id") or current.sweep_id])


def comparison_config(config: JudgeConfig) -> JudgeConfig:
    """The lane comparison without the SLO guards (they judge this sweep alone), at alpha × (1 − SLO_SHARE)."""
    return replace(config, alpha=config.alpha * (1 - SLO_SHARE),
                   metrics=tuple(replace(m, slo=None) for m in config.metrics)).validate()


def guard_config(config: JudgeConfig) -> JudgeConfig | None:
    """Only the metrics with an SLO guard; None when none has one. The judge gives each guard its SLO share of
    the metric's alpha; the rest goes to a comparison of identical lanes, which never rejects."""
    metrics = tuple(m for m in config.metrics if m.enabled and m.slo is not None)
    return replace(config, metrics=metrics).validate() if metrics else None


def breached_guards(guards: dict | None) -> list[dict]:
    return [m for m in (guards or {}).get("metrics", []) if m.get("slo") and m["slo"]["lanes"].get(
        "canary", {}).get("breached")]


def decide(guards: dict | None, comparison: dict | None, reference: int, history: int = 0) -> tuple[str, str]:
    """(verdict, reason) from the guards' and the comparison's judge verdicts; `reference`: sweeps pooled,
    `history`: sweeps in the history before this one."""
    breached = breached_guards(guards)
    if breached:
        return DEGRADED, "SLO breached: " + "; ".join(_breach(m) for m in breached)
    if comparison is None:
        first = ("first sweep of this cluster: no history to compare with yet" if not history else
                 f"no earlier healthy sweep with these probe settings to compare with ({history} sweep(s) in the "
                 f"history)") + "; judged by the SLO guards only"
        if guards is None:
            return INCONCLUSIVE, first + ", and no metric has an SLO guard"
        if guards["verdict"] == PROMOTE:
            guarded = ", ".join(m["name"] for m in guards["metrics"])
            return HEALTHY, f"{first}: within every guard ({guarded})"
        return INCONCLUSIVE, f"{first}: {relabel(guards['reason'])}"
    against = f"the last {reference} healthy sweep(s)" if reference != 1 else "the last healthy sweep"
    if comparison["verdict"] == ROLLBACK:
        return DEGRADED, f"worse than {against}: {relabel(comparison['reason'])}"
    if comparison["verdict"] == INCONCLUSIVE:
        return INCONCLUSIVE, f"compared with {against}: {relabel(comparison['reason'])}"
    if guards is not None and guards["verdict"] != PROMOTE:
        return INCONCLUSIVE, f"SLO guards: {relabel(guards['reason'])}"
    decided = sum(1 for m in comparison["metrics"] if m["decision"] in ("PASS", "FAIL"))
    return HEALTHY, (f"no regression against {against} in {decided} metric(s)"
                     + (" and within every SLO guard" if guards is not None else ""))


def _breach(m: dict) -> str:
    seen, guard = m["canary"], m["slo"]
    value = _pct(seen.get("rate")) if m["kind"] == "rate" else f"{seen.get('value') or 0:.4g} {seen.get('unit', '')}"
    return (f"{m['name']}: {value.strip()} observed, guard {guard['guard']} (e-value "
            f"{guard['lanes']['canary']['e_value']:.3g} >= {guard['threshold']:.3g})")


def relabel(text: str) -> str:
    """The judge's lane words in a sweep's terms: canary = this sweep, baseline = the reference."""
    text = re.sub(r"\bbaseline's\b", "reference's", text)
    text = re.sub(r"\bbaseline\b", "reference", text)
    text = re.sub(r"\bcanary's\b", "this sweep's", text)
    return re.sub(r"\bcanary\b", "this sweep", text)


# ----- summary and trend -----

def sweep_summary(rows: Iterable[Row]) -> dict:
    """One sweep's figures for the trend: observations, p50/p99 latencies (ms), error, loss and availability
    shares (both lanes pooled, over the rows given: a sweep's judged rows)."""
    outcomes: Counter = Counter()
    hists: dict[str, dict[int, int]] = {"e2e_latency_ms": {}, "produce_latency_ms": {}}
    for lane, _, metric, b, c in rows:
        if lane not in LANES:
            continue
        if metric.startswith(OUTCOME_PREFIX):
            outcomes[metric.removeprefix(OUTCOME_PREFIX)] += c
        elif metric in hists:
            hists[metric][b] = hists[metric].get(b, 0) + c
    total = sum(outcomes.values())

    def share(names) -> float | None:
        return sum(outcomes[n] for n in names) / total if total else None

    def q(metric: str, quantile: float) -> float | None:
        value = H.quantile(hists[metric], quantile)
        return None if value is None else round(value, 2)

    failures = share(FAILURES)
    return {"observations": total, "e2e_p50_ms": q("e2e_latency_ms", 0.5), "e2e_p99_ms": q("e2e_latency_ms", 0.99),
            "produce_p99_ms": q("produce_latency_ms", 0.99), "error_rate": share(("produce_error", "consume_error")),
            "loss_rate": share(("lost",)), "availability": None if failures is None else 1 - failures}


def trend(store: HistoryStore, count: int) -> list[dict]:
    """The last `count` sweeps of the cluster, oldest first: id, time, verdict and summary figures."""
    points = []
    for entry in store.entries()[-count:]:
        summary = entry.meta.get("summary") or sweep_summary(store.load(entry).judged_rows())
        points.append({"sweep_id": entry.sweep_id, "started_ms": entry.meta.get("started_ms"),
                       "verdict": entry.verdict, "first_sweep": bool(entry.meta.get("first_sweep")),
                       "during_rollout": bool(entry.meta.get("during_rollout"))} | summary)
    return points


VERDICT_COLOURS = {HEALTHY: "#1a7f37", DEGRADED: "#cf222e", INCONCLUSIVE: "#9a6700", None: "#777777"}


def plot_trend(points: list[dict], path: Path, cluster: str) -> bytes:
    """trend.png: per sweep the p99 latencies, error and loss rates and availability; markers coloured by the
    sweep's verdict. Returns the PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    times = [datetime.fromtimestamp((p["started_ms"] or 0) / 1000, UTC) for p in points]
    colours = [VERDICT_COLOURS.get(p["verdict"], "#777777") for p in points]

    def series(key: str, scale: float = 1.0) -> list[float]:
        return [float("nan") if p.get(key) is None else p[key] * scale for p in points]

    fig, axes = plt.subplots(1, 3, figsize=(14, 3.6))
    # Each series its line colour and marker shape; each sweep's marker filled with the colour of its verdict.
    panels = (("p99 latency (ms)", (("e2e_p99_ms", "end to end", 1.0, "#1f77b4", "o"),
                                    ("produce_p99_ms", "produce", 1.0, "#7f7f7f", "s"))),
              ("errors and loss (%)", (("error_rate", "produce + consume errors", 100.0, "#1f77b4", "o"),
                                       ("loss_rate", "lost", 100.0, "#7f7f7f", "s"))),
              ("availability (%)", (("availability", "availability", 100.0, "#1f77b4", "o"),)))
    for ax, (title, lines) in zip(axes, panels, strict=True):
        for key, label, scale, line_colour, marker in lines:
            ys = series(key, scale)
            ax.plot(times, ys, "-", color=line_colour, linewidth=1, zorder=1, label=label)
            ax.scatter(times, ys, c=colours, edgecolors=line_colour, marker=marker, s=28, zorder=2)
        ax.set_title(title)
        if title.startswith("p99") and all(y > 0 for y in series("e2e_p99_ms")):
            ax.set_yscale("log")  # a degraded sweep's seconds would flatten the healthy milliseconds
        ax.tick_params(axis="x", labelrotation=30, labelsize=8)
        if len(lines) > 1:
            ax.legend(fontsize=8)
    fig.suptitle(f"{cluster}: last {len(points)} sweep(s); markers green healthy, red degraded, amber inconclusive",
                 fontsize=10, y=1.03)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    plt.close(fig)
    path.write_bytes(buf.getvalue())
    return buf.getvalue()


# ----- report -----

_STYLE = """body{font:14px/1.4 system-ui,sans-serif;margin:2em;max-width:1200px}table{border-collapse:collapse}
td,th{border:1px solid #ccc;padding:3px 8px;text-align:left;vertical-align:top;font-size:90%}th{background:#f3f3f3}
.verdict{color:#fff;padding:.6em 1em;font-size:1.4em;border-radius:6px}"""


def _value(lane: dict) -> str:
    v = lane.get("value")
    if v is None:
        return "–"
    return f"{100 * v:.3g} %" if "rate" in lane else f"{v:.4g}"


def write_report(out: Path, result: dict, trend_png: bytes | None, comparison: dict | None,
                 guards: dict | None) -> Path:
    """report.html: the verdict and why, this sweep against the reference metric by metric, the SLO guards,
    the trend; links to the judge's comparison report."""
    e = html.escape
    colour = VERDICT_COLOURS.get(result["verdict"], "#777777")
    rows = []
    for m in (comparison or {}).get("metrics", []):
        eff = m["effect"].get("relative")
        rows.append(f"<tr><td>{e(m['name'])}</td><td>{e(m['decision'])}</td><td>{_value(m['canary'])}</td>"
                    f"<td>{_value(m['baseline'])}</td><td>{'–' if eff is None else f'{100 * eff:+.3g} %'}</td>"
                    f"<td>{e(relabel(m['reason']))}</td></tr>")
    table = ("<h2>This sweep against the reference</h2><table><tr><th>metric</th><th>decision</th>"
             "<th>this sweep</th><th>reference</th><th>change</th><th>reason</th></tr>" + "".join(rows) +
             '</table><p><a href="comparison/report.html">The judge\'s report of the comparison</a> (lane '
             "<i>canary</i> = this sweep, <i>baseline</i> = the reference)</p>") if comparison else ""
    guard_rows = "".join(
        f"<tr><td>{e(m['name'])}</td><td>{e(m['slo']['guard'])}</td><td>{_value(m['canary'])}</td>"
        f"<td>{'BREACHED' if m['slo']['lanes']['canary']['breached'] else 'ok'}</td>"
        f"<td>{m['slo']['lanes']['canary']['e_value']:.3g}</td></tr>"
        for m in (guards or {}).get("metrics", []) if m.get("slo"))
    guard_table = ("<h2>SLO guards (this sweep alone)</h2><table><tr><th>metric</th><th>guard</th><th>this sweep"
                   "</th><th>state</th><th>e-value</th></tr>" + guard_rows + "</table>") if guard_rows else ""
    s = result["summary"]
    figures = ", ".join(f"{label} {fmt}" for label, fmt in (
        ("observations", s["observations"]), ("e2e p99", _ms(s["e2e_p99_ms"])),
        ("produce p99", _ms(s["produce_p99_ms"])), ("errors", _pct(s["error_rate"])), ("lost", _pct(s["loss_rate"])),
        ("availability", _pct(s["availability"]))))
    reference = ", ".join(result["reference"]) or "none"
    image = (f'<h2>Trend</h2><img alt="trend" src="data:image/png;base64,{base64.b64encode(trend_png).decode()}">'
             '<p><a href="trend.json">trend.json</a></p>') if trend_png else ""
    page = f"""<!doctype html><html><head><meta charset="utf-8">
<title>{e(result['cluster'])}: {e(result['verdict'])}</title><style>{_STYLE}</style></head><body>
<h1>Health sweep of {e(result['cluster'])}</h1>
<p class="verdict" style="background:{colour}">{e(result['verdict'])}</p>
<p><b>{e(result['reason'])}</b></p>
<p>Sweep {e(result['sweep_id'])} at {e(_when(result['started_ms']))}, {result['duration_s']:g} s of probe traffic at
{result['rate']:g} msg/s per partition on {e(result['bootstrap_servers'])}{' (during a rollout: read-only probe)'
if result['during_rollout'] else ''}: {e(figures)}.</p>
<p>Reference: {e(reference)}.</p>
{table}{guard_table}{image}
<p style="color:#666">result schema {RESULT_SCHEMA} v{SCHEMA_VERSION}; details in result.json</p></body></html>"""
    path = out / "report.html"
    path.write_text(page)
    return path


def _ms(v: float | None) -> str:
    return "–" if v is None else f"{v:.4g} ms"


def _pct(v: float | None) -> str:
    return "–" if v is None else f"{100 * v:.4g} %"


def _when(ms: int | None) -> str:
    return datetime.fromtimestamp((ms or 0) / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


# ----- alerts -----

@dataclass(frozen=True)
class Alert:
    """What an alert says: a cluster DEGRADED, or a sweep that could not run (FAILED)."""

    cluster: str | None
    status: str
    reason: str
    sweep_id: str | None = None
    report: str | None = None
    details: dict = field(default_factory=dict)
    source: str = "kafka-canary health sweep"
    at_ms: int = field(default_factory=lambda: int(time.time() * 1000))

    def to_dict(self) -> dict:
        return asdict(self)


def send_alert(alert: Alert, root: Path | None = None, webhook_url: str | None = None,
               timeout: float = 10.0) -> dict:
    """Logs one alert line, appends the alert to `<root>/alerts.jsonl` and, when `webhook_url` is given, POSTs
    it there as JSON. The webhook URL (it often carries a token) is never logged; a webhook failure is logged
    and reported, not raised: the alert is in the log and the file either way."""
    log.warning("ALERT kafka-canary %s: cluster %s: %s%s", alert.status, alert.cluster, alert.reason,
                f" (report {alert.report})" if alert.report else "")
    root = Path(root or history_root())
    root.mkdir(parents=True, exist_ok=True)
    path = root / "alerts.jsonl"
    with open(path, "a") as f:
        f.write(json.dumps(alert.to_dict(), default=str) + "\n")
    webhook = "not configured"
    if webhook_url:
        import requests

        try:
            response = requests.post(webhook_url, json=alert.to_dict(), timeout=timeout)
            webhook = "sent" if response.ok else f"refused: HTTP {response.status_code}"
        except requests.RequestException as exc:  # its message names the URL: only the kind is logged
            webhook = f"failed: {type(exc).__name__}"
        if webhook != "sent":
            log.warning("the alert webhook did not take the alert (%s); it is in %s", webhook, path)
    return {"alerts_file": str(path), "webhook": webhook}


# ----- one sweep -----

@dataclass
class SweepResult:
    """JSON-able outcome of one sweep (result.json holds this plus the judge verdicts)."""

    schema: str
    schema_version: int
    cluster: str
    sweep_id: str
    verdict: str
    reason: str
    first_sweep: bool
    reference: list[str]
    during_rollout: bool
    bootstrap_servers: str
    started_ms: int
    finished_ms: int
    duration_s: float
    rate: float
    seconds: float
    summary: dict
    excluded: dict
    probe: dict
    out: str
    result_file: str
    report: str
    history_file: str
    trend_file: str
    trend_png: str
    pruned: list[str]

    def to_dict(self) -> dict:
        return asdict(self)

    def brief(self) -> dict:
        """The small form (Airflow XCom, the CLI's --json)."""
        return {k: getattr(self, k) for k in ("cluster", "sweep_id", "verdict", "reason", "first_sweep",
                                              "during_rollout", "seconds", "report", "result_file", "history_file",
                                              "trend_file")} | {"reference_sweeps": len(self.reference),
                                                                "summary": self.summary}


def new_sweep_id(now: float | None = None) -> str:
    """Sortable by time: 20260101T120000Z-1a2b3c."""
    stamp = datetime.fromtimestamp(time.time() if now is None else now, UTC).strftime("%Y%m%dT%H%M%SZ")
    return f"{stamp}-{uuid.uuid4().hex[:6]}"


def rollout_holder(config: SweepConfig) -> dict | None:
    """The rollout holding the cluster's lock, if any (None also when the lock cannot be read: the probe then
    says what is wrong with the cluster)."""
    from confluent_kafka import KafkaException

    from canary.rollout.lock import ClusterLock

    try:
        return ClusterLock(config.bootstrap_servers, config.client, timeout=10).holder()
    except (KafkaException, CanaryError) as exc:
        log.info("could not read the rollout lock (%s); probing as usual", exc)
        return None


def run_sweep(config: SweepConfig) -> dict:
    """One sweep of one cluster (module docstring). Returns SweepResult.brief(); result.json holds the rest.
    Raises ClusterUnreachable when no broker answers, SweepError / judge ConfigError for bad settings."""
    from canary.observations import read_file_counted
    from canary.probe.config import ProbeConfig
    from canary.probe.runner import Probe

    started = time.monotonic()
    judge_cfg = config.judge_config()  # a bad judge config fails before any traffic
    store = HistoryStore(config.history_dir)
    sweep_id = new_sweep_id()
    out = Path(config.out) if config.out else store.reports / sweep_id
    out.mkdir(parents=True, exist_ok=True)
    observations = out / "observations.jsonl"
    observations.unlink(missing_ok=True)
    holder = rollout_holder(config)
    if holder is not None:
        log.info("rollout %s holds cluster %s: the probe only reads the canary topic", holder.get("run_id"),
                 config.cluster)
    probe_config = ProbeConfig(
        bootstrap_servers=config.bootstrap_servers, topic=config.topic, rate=config.rate,
        message_size=config.message_size, duration=config.duration, run_id=f"sweep-{sweep_id}",
        producer_id=f"sweep-{config.cluster}-{socket.gethostname()}-{os.getpid()}"[:200],
        client=dict(config.client), observations_file=str(observations), reconcile=holder is None)
    log.info("sweep %s of %s: probing %s for %gs at %g msg/s per partition", sweep_id, config.cluster,
             config.bootstrap_servers, config.duration, config.rate)
    started_ms = int(time.time() * 1000)
    summary = Probe(probe_config).run()
    finished_ms = int(time.time() * 1000)

    parsed, bad = read_file_counted(observations)
    bucket_ms = int(judge_cfg.bucket_s * 1000)
    agg = Aggregates.from_observations(parsed, bucket_ms, bad)
    sends = [o.send_ts for o in parsed]
    record = SweepRecord(sweep_id, rows_of(agg), {
        "schema": HISTORY_SCHEMA, "schema_version": SCHEMA_VERSION, "cluster": config.cluster, "sweep_id": sweep_id,
        "probe_run_id": probe_config.run_id, "started_ms": started_ms, "finished_ms": finished_ms,
        "first_send_ms": min(sends, default=None), "last_send_ms": max(sends, default=None),
        "bucket_ms": bucket_ms, "rate": config.rate, "message_size": config.message_size, "topic": config.topic,
        "duration_s": config.duration, "during_rollout": holder is not None})

    store_entries = store.entries()
    reference = [store.load(e) for e in select_reference(store_entries, record.meta, config.reference_sweeps)]
    guard_cfg = guard_config(judge_cfg)
    guards = judge(guard_aggregates(record), guard_cfg) if guard_cfg else None
    comparison_agg = comparison_aggregates(record, reference) if reference else None
    comparison = judge(comparison_agg, comparison_config(judge_cfg)) if comparison_agg else None
    verdict, reason = decide(guards, comparison, len(reference), len(store_entries))
    if agg.bad:  # as the judge does: excluded data is named in the reason
        reason += (f" ({sum(agg.bad.values())} observation(s) excluded: "
                   + ", ".join(f"{k} {v}" for k, v in sorted(agg.bad.items())) + ")")
    sweep = sweep_summary(record.judged_rows())
    record.meta.update(verdict=verdict, reason=reason, first_sweep=not store_entries,
                       reference=[r.sweep_id for r in reference], summary=sweep)
    history_file = store.append(record)
    pruned = store.prune(config.keep_history)

    points = trend(store, config.trend_sweeps)
    trend_file = out / "trend.json"
    trend_file.write_text(json.dumps({"cluster": config.cluster, "sweeps": points}, indent=1))
    png = plot_trend(points, out / "trend.png", config.cluster)
    for name in ("trend.json", "trend.png"):  # the latest trend beside the history, for dashboards
        shutil.copyfile(out / name, store.directory / name)
    if comparison is not None:
        from canary.judge.report import write_report as write_judge_report

        (out / "comparison").mkdir(exist_ok=True)
        (out / "comparison" / "verdict.json").write_text(json.dumps(comparison, indent=2, default=float))
        write_judge_report(out / "comparison", comparison, comparison_agg)
    if not config.keep_observations:
        observations.unlink(missing_ok=True)

    result = SweepResult(
        schema=RESULT_SCHEMA, schema_version=SCHEMA_VERSION, cluster=config.cluster, sweep_id=sweep_id,
        verdict=verdict, reason=reason, first_sweep=not store_entries, reference=[r.sweep_id for r in reference],
        during_rollout=holder is not None, bootstrap_servers=config.bootstrap_servers, started_ms=started_ms,
        finished_ms=finished_ms, duration_s=config.duration, rate=config.rate,
        seconds=round(time.monotonic() - started, 1), summary=sweep, excluded=dict(sorted(agg.bad.items())),
        probe={lane: {k: t[k] for k in ("sent", "acked", "lost", "produce_errors")}
               for lane, t in summary.lanes.items()} | {"observations_written": summary.observations},
        out=str(out), result_file=str(out / "result.json"), report=str(out / "report.html"),
        history_file=str(history_file), trend_file=str(trend_file), trend_png=str(out / "trend.png"), pruned=pruned)
    write_report(out, result.to_dict(), png, comparison, guards)
    (out / "result.json").write_text(json.dumps(result.to_dict() | {"guards": guards, "comparison": comparison},
                                                indent=2, default=float))
    log.info("sweep %s of %s: %s — %s (%.1fs)", sweep_id, config.cluster, verdict, reason, result.seconds)
    return result.brief()


# ----- command line -----

def register(sub) -> None:
    p = sub.add_parser("sweep", help="health sweep: probe a cluster briefly, compare with its history, keep a trend; "
                                     "exit 0 healthy, 1 degraded, 3 inconclusive, 2 error",
                       description=__doc__.split("\n\n")[0])
    p.add_argument("--bootstrap-servers", help="host:port[,host:port] (or bootstrap.servers in --config)")
    p.add_argument("--config", help="properties or JSON file of librdkafka settings (SASL, TLS, …); env "
                                    "KAFKA_CANARY_CLIENT_<KEY> adds client settings")
    p.add_argument("--cluster-name", help="the name the history is kept under (default: the bootstrap servers)")
    p.add_argument("--duration", default="30s", help="probe traffic, e.g. 30s (default %(default)s)")
    p.add_argument("--rate", type=float, default=20.0, help="messages per second per partition (default %(default)g)")
    p.add_argument("--reference", type=int, default=6, help="healthy sweeps pooled as the reference (default 6)")
    p.add_argument("--judge-config", metavar="judge.yaml", help="judge thresholds merged over the sweep's defaults")
    p.add_argument("--history", type=Path, help=f"history root (default ${HISTORY_ENV} or {DEFAULT_HISTORY})")
    p.add_argument("--out", type=Path, help="result.json, report.html, trend (default: under the history)")
    p.add_argument("--keep-observations", action="store_true", help="keep observations.jsonl in --out")
    p.add_argument("--alert", action="store_true", help=f"when DEGRADED: append to <history>/alerts.jsonl and POST "
                                                        f"to ${WEBHOOK_ENV} if set")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=cmd_sweep)


def cmd_sweep(args: argparse.Namespace) -> int:
    from canary.probe import config as probe_config

    client = probe_config.load(args.bootstrap_servers, args.config)  # file, env; validated as the probe's
    duration = probe_config.parse_duration(args.duration)
    config = SweepConfig(bootstrap_servers=client.bootstrap_servers, cluster_name=args.cluster_name,
                         client=client.client, duration=duration or 0, rate=args.rate, judge=args.judge_config,
                         reference_sweeps=args.reference, history=args.history, out=args.out,
                         keep_observations=args.keep_observations)
    print(f"sweeping {config.cluster} ({config.bootstrap_servers}) for {config.duration:g}s at {config.rate:g} "
          f"msg/s per partition ...", file=sys.stderr, flush=True)
    result = run_sweep(config)
    if args.alert and result["verdict"] == DEGRADED:
        sent = send_alert(Alert(config.cluster, DEGRADED, result["reason"], result["sweep_id"], result["report"]),
                          Path(config.history or history_root()), os.environ.get(WEBHOOK_ENV))
        result["alert"] = sent
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        s = result["summary"]
        print(f"{result['verdict']}: {result['reason']}")
        print(f"  {s['observations']} observations, e2e p99 {_ms(s['e2e_p99_ms'])}, produce p99 "
              f"{_ms(s['produce_p99_ms'])}, errors {_pct(s['error_rate'])}, lost {_pct(s['loss_rate'])}, "
              f"availability {_pct(s['availability'])}; {result['seconds']:g}s")
        print(f"  report {result['report']}\n  history {result['history_file']}\n  trend {result['trend_file']}")
    return EXIT_CODES[result["verdict"]]
