"""One sweep of one cluster, start to end: probe, aggregate, compare with the reference, decide, keep the history,
write the trend, the report and result.json (the package's docstring tells the whole story)."""

from __future__ import annotations

import json
import logging
import os
import shutil
import socket
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from canary.errors import CanaryError
from canary.judge import Aggregates, JudgeConfig, judge
from canary.rollout.core.index import IndexEntry, RunsIndex, sweep_row_id
from canary.rollout.core.record import Origin
from canary.storage import Store
from canary.sweep.compare import (
    comparison_aggregates,
    comparison_config,
    guard_aggregates,
    guard_config,
    select_reference,
)
from canary.sweep.config import SweepConfig
from canary.sweep.decide import decide
from canary.sweep.history import HISTORY_SCHEMA, SCHEMA_VERSION, HistoryStore, SweepRecord, rows_of
from canary.sweep.report import write_report
from canary.sweep.result import RESULT_SCHEMA, SweepBrief, SweepResult
from canary.sweep.summary import sweep_summary
from canary.sweep.trend import plot_trend, trend

log = logging.getLogger("canary.sweep")


@dataclass
class _Probed:
    """What the probe left: this sweep's record, the observations excluded per reason, the probe's own counts."""

    record: SweepRecord
    excluded: dict[str, int]
    probe: dict


@dataclass
class _Judged:
    """The verdict and what it rests on: the reference sweeps, the guards' and the comparison's judge verdicts."""

    verdict: str
    reason: str
    first_sweep: bool
    reference: list[SweepRecord]
    guards: dict | None
    comparison: dict | None
    comparison_agg: Aggregates | None


def new_sweep_id(now: float | None = None) -> str:
    """Sortable by time: 20260101T120000Z-1a2b3c."""
    stamp = datetime.fromtimestamp(time.time() if now is None else now, UTC).strftime("%Y%m%dT%H%M%SZ")
    return f"{stamp}-{uuid.uuid4().hex[:6]}"


def rollout_holder(config: SweepConfig) -> dict | None:
    """The rollout holding the cluster's lock, if any (None also when the lock cannot be read: the probe then
    says what is wrong with the cluster)."""
    from confluent_kafka import KafkaException

    from canary.rollout.core.lock import ClusterLock

    try:
        return ClusterLock(config.bootstrap_servers, config.client, timeout=10).holder()
    except (KafkaException, CanaryError) as exc:
        log.info("could not read the rollout lock (%s); probing as usual", exc)
        return None


def _probe(config: SweepConfig, sweep_id: str, observations: Path, read_only: bool, bucket_ms: int) -> _Probed:
    """Runs the probe for the sweep's duration (only reading the canary topic when `read_only`: a rollout holds
    the cluster) and aggregates what it observed."""
    from canary.observations import read_file_counted
    from canary.probe.config import ProbeConfig
    from canary.probe.runner import Probe

    probe_config = ProbeConfig(
        bootstrap_servers=config.bootstrap_servers, topic=config.topic, rate=config.rate,
        message_size=config.message_size, duration=config.duration, run_id=f"sweep-{sweep_id}",
        producer_id=f"sweep-{config.cluster}-{socket.gethostname()}-{os.getpid()}"[:200],
        client=dict(config.client), observations_file=str(observations), reconcile=not read_only)
    log.info("sweep %s of %s: probing %s for %gs at %g msg/s per partition", sweep_id, config.cluster,
             config.bootstrap_servers, config.duration, config.rate)
    started_ms = int(time.time() * 1000)
    summary = Probe(probe_config).run()
    finished_ms = int(time.time() * 1000)

    parsed, bad = read_file_counted(observations)
    agg = Aggregates.from_observations(parsed, bucket_ms, bad)
    sends = [observation.send_ts for observation in parsed]
    record = SweepRecord(sweep_id, rows_of(agg), {
        "schema": HISTORY_SCHEMA, "schema_version": SCHEMA_VERSION, "cluster": config.cluster, "sweep_id": sweep_id,
        "probe_run_id": probe_config.run_id, "started_ms": started_ms, "finished_ms": finished_ms,
        "first_send_ms": min(sends, default=None), "last_send_ms": max(sends, default=None),
        "bucket_ms": bucket_ms, "rate": config.rate, "message_size": config.message_size, "topic": config.topic,
        "duration_s": config.duration, "during_rollout": read_only})
    probe = {lane: {key: counts[key] for key in ("sent", "acked", "lost", "produce_errors")}
             for lane, counts in summary.lanes.items()} | {"observations_written": summary.observations}
    return _Probed(record, dict(agg.bad), probe)


def _judge(config: SweepConfig, judge_config: JudgeConfig, store: HistoryStore, probed: _Probed) -> _Judged:
    """This sweep against the reference from the store, and against the SLO guards alone; the verdict."""
    record = probed.record
    entries = store.entries()
    reference = [store.load(entry) for entry in select_reference(entries, record.meta, config.reference_sweeps)]
    guards_config = guard_config(judge_config)
    guards = judge(guard_aggregates(record), guards_config) if guards_config else None
    comparison_agg = comparison_aggregates(record, reference) if reference else None
    comparison = judge(comparison_agg, comparison_config(judge_config)) if comparison_agg is not None else None
    verdict, reason = decide(guards, comparison, len(reference), len(entries))
    if probed.excluded:  # as the judge does: excluded data is named in the reason
        reason += (f" ({sum(probed.excluded.values())} observation(s) excluded: "
                   + ", ".join(f"{name} {count}" for name, count in sorted(probed.excluded.items())) + ")")
    return _Judged(verdict, reason, not entries, reference, guards, comparison, comparison_agg)


def _write_trend(config: SweepConfig, store: HistoryStore, out: Path) -> tuple[Path, bytes]:
    """trend.json and trend.png in `out`, copied beside the history (the latest trend, for dashboards)."""
    points = trend(store, config.trend_sweeps)
    trend_file = out / "trend.json"
    trend_file.write_text(json.dumps({"cluster": config.cluster, "sweeps": [p.model_dump() for p in points]},
                                     indent=1))
    png = plot_trend(points, out / "trend.png", config.cluster)
    for name in ("trend.json", "trend.png"):
        shutil.copyfile(out / name, store.directory / name)
    return trend_file, png


def _write_comparison(out: Path, judged: _Judged) -> None:
    """The judge's own verdict and report of the comparison, in `out/comparison`."""
    if judged.comparison is None or judged.comparison_agg is None:  # both or neither: no reference, no comparison
        return
    from canary.judge.report import write_report as write_judge_report

    (out / "comparison").mkdir(exist_ok=True)
    (out / "comparison" / "verdict.json").write_text(json.dumps(judged.comparison, indent=2, default=float))
    write_judge_report(out / "comparison", judged.comparison, judged.comparison_agg)


def run_sweep(config: SweepConfig, history: Store | None = None, index: RunsIndex | None = None,
              origin: Origin | None = None) -> SweepBrief:
    """One sweep of one cluster (the package's docstring). `history`: the cluster's history store (default
    config.history_store()); on an object store its files are brought into this machine's work directory first
    and what the sweep wrote is sent back at the end, so sweeps on different machines share one history. `index`:
    the runs index that lists the sweep beside the rollouts (started by `origin`), its pruned sweeps dropped.
    Returns SweepResult.brief(); result.json holds the rest. Raises ClusterUnreachable when no broker answers,
    SweepError / judge ConfigError for bad settings, StoreError when the history's store cannot be used."""
    started = time.monotonic()
    judge_config = config.judge_config()  # a bad judge config fails before any traffic
    remote = history or config.history_store()
    store = HistoryStore(remote.workdir())
    remote.pull(store.directory)  # before any traffic: an unusable store fails the sweep first
    sweep_id = new_sweep_id()
    out = Path(config.out) if config.out else store.reports / sweep_id
    out.mkdir(parents=True, exist_ok=True)
    observations = out / "observations.jsonl"
    observations.unlink(missing_ok=True)
    holder = rollout_holder(config)
    if holder is not None:
        log.info("rollout %s holds cluster %s: the probe only reads the canary topic", holder.get("run_id"),
                 config.cluster)
    probed = _probe(config, sweep_id, observations, holder is not None, int(judge_config.bucket_s * 1000))
    judged = _judge(config, judge_config, store, probed)

    record = probed.record
    summary = sweep_summary(record.judged_rows())
    reference = [past.sweep_id for past in judged.reference]
    record.meta.update(verdict=judged.verdict, reason=judged.reason, first_sweep=judged.first_sweep,
                       reference=reference, summary=summary)
    history_file = store.append(record)
    pruned = store.prune(config.keep_history)
    for old in pruned:  # gone from the store as from this disk, or the next pull brings them back
        remote.delete(f"{old}.parquet")
        remote.delete(f"reports/{old}")
    trend_file, png = _write_trend(config, store, out)
    _write_comparison(out, judged)
    if not config.keep_observations:
        observations.unlink(missing_ok=True)

    result = SweepResult(
        schema=RESULT_SCHEMA, schema_version=SCHEMA_VERSION, cluster=config.cluster, sweep_id=sweep_id,
        verdict=judged.verdict, reason=judged.reason, first_sweep=judged.first_sweep,
        reference=reference, during_rollout=holder is not None,
        bootstrap_servers=config.bootstrap_servers, started_ms=record.meta["started_ms"],
        finished_ms=record.meta["finished_ms"], duration_s=config.duration, rate=config.rate,
        seconds=round(time.monotonic() - started, 1), summary=summary, excluded=dict(sorted(probed.excluded.items())),
        probe=probed.probe, out=str(out), result_file=str(out / "result.json"), report=str(out / "report.html"),
        history=remote.url, history_file=str(history_file), trend_file=str(trend_file),
        trend_png=str(out / "trend.png"), pruned=pruned)
    write_report(out, result, png, judged.comparison, judged.guards)
    (out / "result.json").write_text(json.dumps(
        result.to_dict() | {"guards": judged.guards, "comparison": judged.comparison}, indent=2, default=float))
    remote.push(store.directory)
    if index is not None:
        _index_sweep(index, result, origin)
    log.info("sweep %s of %s: %s — %s (%.1fs)", sweep_id, config.cluster, judged.verdict, judged.reason,
             result.seconds)
    return result.brief()


def _index_sweep(index: RunsIndex, result: SweepResult, origin: Origin | None) -> None:
    """The sweep's row in the runs index, its pruned sweeps' rows gone; a failure is logged, never raised (the index
    is a list of pages, the history is the record)."""
    try:
        index.put(IndexEntry.of_sweep(result.cluster, result.sweep_id, result.verdict, result.started_ms,
                                      result.finished_ms, origin))
        index.remove(sweep_row_id(result.cluster, old) for old in result.pruned)
    except (OSError, CanaryError) as exc:
        log.warning("the runs index was not updated for sweep %s: %s", result.sweep_id, exc)
