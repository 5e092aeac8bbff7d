"""What a sweep is judged against and how: the reference (the last healthy sweeps with the same probe settings,
pooled), the two-lane aggregates the judge compares (this sweep as `canary`, the reference as `baseline`, bucket
by bucket), and the judge configs of the comparison and of the SLO guards, between which alpha is split."""

from __future__ import annotations

from collections.abc import Iterable

from canary.judge import Aggregates, JudgeConfig
from canary.judge.alpha import SLO_SHARE
from canary.observations import LANES
from canary.sweep.config import HEALTHY
from canary.sweep.history import HistoryEntry, Row, SweepRecord

# The reference's partitions are renumbered per reference sweep, so the judge's exposure (distinct partitions per
# bucket × bucket length) counts each pooled sweep's partitions once, as throughput needs.
PARTITION_STRIDE = 1_000_000


def comparable(meta: dict, current: dict) -> bool:
    """Probe settings that shape the numbers must match for two sweeps to be compared."""
    return all(meta.get(key) == current.get(key) for key in ("bucket_ms", "rate", "message_size"))


def select_reference(entries: Iterable[HistoryEntry], current: dict, count: int) -> list[HistoryEntry]:
    """The newest `count` sweeps that may serve as the reference: HEALTHY, comparable settings, not taken
    during a rollout. A DEGRADED sweep never becomes the reference, so a lasting degradation keeps alerting
    (to accept a new normal, remove the degraded sweeps' files)."""
    eligible = [entry for entry in entries if entry.verdict == HEALTHY and not entry.meta.get("during_rollout")
                and comparable(entry.meta, current) and entry.sweep_id != current.get("sweep_id")]
    return eligible[-count:]


def comparison_aggregates(current: SweepRecord, reference: list[SweepRecord]) -> Aggregates:
    """This sweep as the `canary` lane, the pooled reference as `baseline`, on this sweep's full buckets: the
    k-th full bucket of every reference sweep lands in the k-th full bucket of this one (reference buckets
    beyond this sweep's length are left out). Both lanes of each sweep are pooled."""
    bucket_ms = current.bucket_ms
    mine = current.full_buckets()
    origin = mine[0] if mine else 0
    rows: list[Row] = []
    index = {bucket: position for position, bucket in enumerate(mine)}
    for lane, bucket, metric, hist_bin, count in current.rows:
        if lane in LANES and bucket in index:
            rows.append(("canary", origin + index[bucket] * bucket_ms, metric, hist_bin, count))
    for number, past in enumerate(reference, start=1):
        theirs = {bucket: position for position, bucket in enumerate(past.full_buckets()[:len(mine)])}
        for lane, bucket, metric, hist_bin, count in past.rows:
            if lane in LANES and bucket in theirs:
                if metric == "partition":
                    hist_bin += number * PARTITION_STRIDE
                rows.append(("baseline", origin + theirs[bucket] * bucket_ms, metric, hist_bin, count))
    return Aggregates.from_rows(rows, bucket_ms, [current.meta.get("probe_run_id") or current.sweep_id,
                                                  *(past.sweep_id for past in reference)])


def guard_aggregates(current: SweepRecord) -> Aggregates:
    """This sweep's full buckets in both lanes: the judge's SLO guards then test this sweep alone, and its lane
    comparison, of identical lanes, cannot find anything."""
    full = set(current.full_buckets())
    rows = [(lane, bucket, metric, hist_bin, count) for seen_in, bucket, metric, hist_bin, count in current.rows
            if seen_in in LANES and bucket in full for lane in LANES]
    return Aggregates.from_rows(rows, current.bucket_ms, [current.meta.get("probe_run_id") or current.sweep_id])


def comparison_config(config: JudgeConfig) -> JudgeConfig:
    """The lane comparison without the SLO guards (they judge this sweep alone), at alpha × (1 − SLO_SHARE)."""
    return config.changed(alpha=config.alpha * (1 - SLO_SHARE),
                          metrics={name: metric.model_copy(update={"slo": None})
                                   for name, metric in config.metrics.items()})


def guard_config(config: JudgeConfig) -> JudgeConfig | None:
    """Only the metrics with an SLO guard; None when none has one. The judge gives each guard its SLO share of
    the metric's alpha; the rest goes to a comparison of identical lanes, which never rejects."""
    metrics = {name: metric for name, metric in config.metrics.items() if metric.enabled and metric.slo is not None}
    return config.changed(metrics=metrics) if metrics else None
