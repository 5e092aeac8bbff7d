"""Scheduled health sweeps: probe one cluster for a short while, compare what the probe saw with
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
   `<history root>/<cluster>/<sweep id>.parquet`, rows as canary.analysis.job.summarize() writes them
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

The modules, one job each: `config` (SweepConfig, the sweep's judge config), `history` (SweepRecord, the Parquet
history store), `compare` (the reference and what the judge compares), `decide` (the verdict), `summary` (one
sweep's figures), `trend`, `result` (SweepResult, SweepBrief), `report` (report.html), `alerts`,
`run` (run_sweep) and `cli` (`kafka-canary sweep`).
"""

from canary.sweep.alerts import WEBHOOK_ENV, Alert, send_alert
from canary.sweep.config import (
    DEGRADED,
    HEALTHY,
    HISTORY_ENV,
    SWEEP_JUDGE,
    SweepConfig,
    SweepError,
    cluster_key,
    history_root,
    sweep_judge_config,
)
from canary.sweep.history import HistoryEntry, HistoryStore, SweepRecord, rows_of
from canary.sweep.result import SweepBrief, SweepResult
from canary.sweep.run import run_sweep

__all__ = ["DEGRADED", "HEALTHY", "HISTORY_ENV", "SWEEP_JUDGE", "WEBHOOK_ENV", "Alert", "HistoryEntry", "HistoryStore",
           "SweepBrief", "SweepConfig", "SweepError", "SweepRecord", "SweepResult", "cluster_key", "history_root",
           "rows_of", "run_sweep", "send_alert", "sweep_judge_config"]
