"""The window's verdict: rebalance disruption per lane (canary.clients.rebalance) and lag and processing time
through the judge, combined worst first."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from canary.analysis.inline import judge_file
from canary.clients.rebalance import RebalanceEvent, account, combine, compare
from canary.judge import brief
from canary.judge.config import DEFAULT_METRICS, JudgeConfig, config_from_dict, merged, read_config_file
from canary.lanes import client_lane
from canary.rollout.migration.spec import MigrationSpec

# The judged client metrics; every other judge metric is off (the instances write no produce or probe data).
JUDGED = ("lag_p99", "processing_latency_p99")


def judge_config(path: str | None = None) -> JudgeConfig:
    """The migration's judge settings: lag_p99 and processing_latency_p99 only (data required, 100 samples per lane),
    short buckets for a short window; a YAML file at `path` is merged over them (its metrics per name)."""
    metrics: dict[str, dict] = {m.name: {"enabled": False} for m in DEFAULT_METRICS if m.name not in JUDGED}
    metrics.update({name: {"must_have_data": True, "min_samples": 100} for name in JUDGED})
    base = {"warmup_s": 5, "bucket_s": 5, "min_buckets": 3, "metrics": metrics}
    return config_from_dict(merged(base, read_config_file(path) if path else None))


def judge_observations(path: Path, out_dir: Path, config: JudgeConfig) -> dict:
    """The judge's verdict on the window's observations file (the reader the rollout and the Spark job share),
    written to out_dir/verdict.json."""
    return judge_file(path, out_dir, config)


def metric_summary(verdict: dict) -> dict:
    """Per judged metric: its decision, reason and the two lanes' values."""
    return {m["name"]: {"decision": m["decision"], "reason": m["reason"], "canary": m["canary"].get("value"),
                        "baseline": m["baseline"].get("value")} for m in verdict["metrics"]}


def window_verdict(spec: MigrationSpec, events: list[RebalanceEvent], span: tuple[float, float], disturbances: int,
                   observations: Path, out_dir: Path) -> dict:
    """The verdict on one window: the rebalance `events` inside `span` (start, end: seconds since the epoch) with
    `disturbances` completed disturbances, and the judge on the window's `observations` file (its verdict.json
    written to `out_dir`). Returns verdict, reason, disruption and the judge's part."""
    slots: dict[str, int] = dict(Counter(client_lane(name) for name in spec.names))
    disruption = compare(account(events, span[0], span[1], slots), disturbances)
    judged = judge_observations(observations, out_dir, judge_config(spec.judge_config))
    verdict, reason = combine(disruption, judged)
    return {"verdict": verdict, "reason": reason, "disruption": disruption,
            "judge": brief(judged).to_dict() | {"metrics": metric_summary(judged),
                                                "file": str(out_dir / "verdict.json")}}
