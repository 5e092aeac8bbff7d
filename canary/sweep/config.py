"""What one sweep is asked to do: its settings (SweepConfig), where a cluster's history lives, and the judge config
a sweep judges with (SWEEP_JUDGE under any overrides)."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, ClassVar

from pydantic import AfterValidator, Field

from canary.errors import CanaryError, ConfigError
from canary.fields import BuiltSpec, ClientSettings, Duration, Location, TopicName, required
from canary.judge import INCONCLUSIVE, JudgeConfig
from canary.judge.config import config_from_dict, merged, read_config_file
from canary.outcome import Outcome
from canary.storage import Store, open_store

HEALTHY, DEGRADED = "HEALTHY", "DEGRADED"
# A sweep's verdict as the outcome whose exit code `kafka-canary sweep` ends with (canary.outcome): healthy as a
# promote, degraded as a rollback, inconclusive as itself.
SWEEP_OUTCOMES = {HEALTHY: Outcome.PROMOTE, DEGRADED: Outcome.ROLLBACK, INCONCLUSIVE: Outcome.INCONCLUSIVE}
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
    """A sweep cannot run as asked; the message says what to fix (a list: one line per problem)."""

    def __init__(self, problems: str | list[str]):
        super().__init__(problems if isinstance(problems, str) else "; ".join(problems))


def history_root() -> str:
    """$KAFKA_CANARY_HISTORY (a path, file://… or s3://bucket/prefix), else ~/.local/state/kafka-canary/history."""
    return os.environ.get(HISTORY_ENV) or DEFAULT_HISTORY


def cluster_key(name: str) -> str:
    """A cluster name as a directory name: [A-Za-z0-9._-], not starting with a dot."""
    key = re.sub(r"[^A-Za-z0-9._-]", "_", name.strip()).lstrip(".")
    if not key:
        raise SweepError(f"cluster name {name!r} has no usable character; pass --cluster-name")
    return key[:120]


def sweep_judge_config(overrides: dict | str | Path | None = None) -> JudgeConfig:
    """SWEEP_JUDGE with `overrides` (a judge config mapping or YAML file, canary/judge/README.md) merged over it;
    a metric named in both gets the fields of both, the override's winning."""
    given = read_config_file(overrides) if isinstance(overrides, str | Path) else overrides
    return config_from_dict(merged(SWEEP_JUDGE, given))


def _cluster_name(name: str | None) -> str | None:
    if name is not None:
        try:
            cluster_key(name)
        except SweepError as exc:
            raise ValueError(str(exc)) from None
    return name


def _judge(value: dict | str | Path | None) -> dict | str | Path | None:
    try:
        sweep_judge_config(value)
    except CanaryError as exc:
        raise ValueError(str(exc).removeprefix(ConfigError.PREFIX)) from None
    return value


class SweepConfig(BuiltSpec):
    """One cluster's sweep. `client`: librdkafka settings (security) passed to the probe untouched. `judge`: a
    judge config mapping or YAML path merged over SWEEP_JUDGE. `out`: where result.json and the report go
    (default `<history root>/<cluster>/reports/<sweep id>`). Durations are seconds or texts such as 30s; a bad
    field raises SweepError naming every problem."""

    error: ClassVar = SweepError

    bootstrap_servers: Annotated[str, required("the cluster's bootstrap servers: pass --bootstrap-servers "
                                               "host:port[,host:port]")]
    cluster_name: Annotated[str | None, AfterValidator(_cluster_name)] = None  # default: the bootstrap servers
    client: ClientSettings = Field(default_factory=dict)
    duration: Annotated[float, Duration(1, 3600)] = 30.0                     # probe traffic
    rate: Annotated[float, Field(strict=True, gt=0, le=10_000)] = 20.0      # probe messages/s per partition
    message_size: Annotated[int, Field(strict=True, ge=0, le=900_000)] = 200
    topic: TopicName = "__kafka_canary"
    judge: Annotated[dict | str | Path | None, AfterValidator(_judge)] = None
    reference_sweeps: Annotated[int, Field(strict=True, ge=1, le=200)] = 6   # healthy sweeps pooled as the reference
    trend_sweeps: Annotated[int, Field(strict=True, ge=1)] = 48              # sweeps shown in the trend
    # history files kept per cluster (about 12 weeks hourly)
    keep_history: Annotated[int, Field(strict=True, ge=1)] = 2000
    # a path or an object store's URL (s3://bucket/prefix), as the run storage; default: history_root()
    history: Location | None = None
    out: Path | None = None
    keep_observations: bool = False  # keep <out>/observations.jsonl (it is also on the cluster)

    @property
    def cluster(self) -> str:
        return cluster_key(self.cluster_name or self.bootstrap_servers)

    def history_store(self, options: Mapping[str, Any] | None = None) -> Store:
        """The cluster's history, `<history root>/<cluster>` (`options`: the object store's settings)."""
        return open_store(self.history or history_root(), options).child(self.cluster)

    def judge_config(self) -> JudgeConfig:
        return sweep_judge_config(self.judge)
