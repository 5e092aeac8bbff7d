"""What one sweep is asked to do: its settings (SweepConfig), where a cluster's history lives, and the judge config
a sweep judges with (SWEEP_JUDGE under any overrides)."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from canary.errors import CanaryError, one_line
from canary.judge import JudgeConfig
from canary.judge.config import config_from_dict

HEALTHY, DEGRADED = "HEALTHY", "DEGRADED"
HISTORY_ENV = "KAFKA_CANARY_HISTORY"
DEFAULT_HISTORY = "~/.local/state/kafka-canary/history"

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


def _read_overrides(overrides: dict | str | Path | None) -> dict:
    """A judge config mapping, as given or read from a YAML file."""
    import yaml

    if isinstance(overrides, str | Path):
        try:
            data = yaml.safe_load(Path(overrides).read_text()) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise SweepError(f"cannot read judge config {overrides}: {one_line(exc)}") from exc
    else:
        data = overrides or {}
    if not isinstance(data, dict):
        raise SweepError(f"judge config must be a mapping (canary/judge/README.md), got {type(data).__name__}")
    data = dict(data)
    if not all(isinstance(fields, dict) for fields in (data.get("metrics") or {}).values()):
        raise SweepError("judge config: every metric must be a mapping of fields")
    return data


def sweep_judge_config(overrides: dict | str | Path | None = None) -> JudgeConfig:
    """SWEEP_JUDGE with `overrides` (a judge config mapping or YAML file, canary/judge/README.md) merged over it;
    a metric named in both gets the fields of both, the override's winning."""
    data = _read_overrides(overrides)
    metrics = {name: dict(fields) for name, fields in SWEEP_JUDGE["metrics"].items()}
    for name, fields in (data.pop("metrics", None) or {}).items():
        metrics[name] = metrics.get(name, {}) | fields
    defaults = {key: value for key, value in SWEEP_JUDGE.items() if key != "metrics"}
    return config_from_dict(defaults | data | {"metrics": metrics})


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
