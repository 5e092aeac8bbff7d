"""Judge configuration: the metrics compared, their floors and roles, and the global error budget.

`load_config(path)` reads a YAML file (format in canary/judge/README.md) and merges it over
`DEFAULT_METRICS`; a metric named in the file replaces only the fields it sets, a new name adds a
metric, `enabled: false` drops one. Everything is validated here so the judge never sees a bad value.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import yaml

from canary.errors import CanaryError, one_line
from canary.observations import OUTCOMES

KINDS = ("rate", "quantile", "throughput")
DIRECTIONS = ("increase", "decrease")  # which change is bad
# Histogram sources the Spark job produces (see canary/analysis/job.py).
SOURCES = ("e2e_latency_ms", "produce_latency_ms", "processing_ms", "lag")
FAILURES = ("produce_error", "lost", "consume_error")


class ConfigError(CanaryError):
    pass


@dataclass(frozen=True)
class MetricSpec:
    """One compared metric.

    kind: `rate` (share of messages whose outcome is in `events`), `quantile` (the `quantile` of
    histogram `source`), `throughput` (acknowledged messages per partition-second).
    direction: which change is a regression. rel_floor / abs_floor: the smallest regression that
    matters (a relative change and an absolute one, in the metric's unit; both must be exceeded).
    critical: a regression stops the rollout at any interim look (fail fast). must_have_data: no
    data (or too little) makes the verdict INCONCLUSIVE instead of skipping the metric. weight:
    its share of the score. min_samples: per lane after the warm-up. slo: absolute guard checked
    on each lane (rate: highest share; quantile: highest value; throughput: lowest rate).
    tolerance: rate metrics only: the canary lane's own guard for events that should never happen
    (loss): the metric fails when the canary's share is significantly above `tolerance` and beyond the
    baseline's by the floors, which a handful of events can show where the lane comparison cannot.
    display_complement: report 1 - rate (availability is reported from its failure share).
    """

    name: str
    kind: str
    source: str = ""
    events: tuple[str, ...] = ()
    quantile: float = 0.99
    direction: str = "increase"
    rel_floor: float = 0.0
    abs_floor: float = 0.0
    critical: bool = False
    must_have_data: bool = True
    weight: float = 1.0
    min_samples: int = 500
    slo: float | None = None
    tolerance: float | None = None
    display_complement: bool = False
    enabled: bool = True

    def validate(self) -> None:
        where = f"judge metric {self.name!r}"
        if self.kind not in KINDS:
            raise ConfigError(f"{where}: kind {self.kind!r} is not one of {KINDS}")
        if self.direction not in DIRECTIONS:
            raise ConfigError(f"{where}: direction {self.direction!r} is not one of {DIRECTIONS}")
        if self.kind == "quantile":
            if self.source not in SOURCES:
                raise ConfigError(f"{where}: source {self.source!r} is not one of {SOURCES}")
            if not 0 < self.quantile < 1:
                raise ConfigError(f"{where}: quantile must be in (0, 1), got {self.quantile}")
            if self.direction != "increase":
                raise ConfigError(f"{where}: quantile metrics regress upwards; direction must be 'increase'")
        if self.kind == "rate":
            bad = [e for e in self.events if e not in OUTCOMES]
            if not self.events or bad:
                raise ConfigError(f"{where}: events must be outcomes from {OUTCOMES}, got {list(self.events)}")
            if self.direction != "increase":
                raise ConfigError(f"{where}: rate metrics count bad outcomes; direction must be 'increase' "
                                  "(use display_complement for a success share)")
        if self.kind == "throughput" and self.direction != "decrease":
            raise ConfigError(f"{where}: throughput regresses downwards; direction must be 'decrease'")
        if self.rel_floor < 0 or self.abs_floor < 0 or self.weight < 0 or self.min_samples < 1:
            raise ConfigError(f"{where}: rel_floor, abs_floor and weight must be >= 0, min_samples >= 1")
        if self.kind == "throughput" and self.slo is not None:
            raise ConfigError(f"{where}: throughput has no slo guard (use availability)")
        if self.tolerance is not None and (self.kind != "rate" or not 0 < self.tolerance < 0.5):
            raise ConfigError(f"{where}: tolerance is for rate metrics and must be in (0, 0.5), got {self.tolerance}")
        if self.kind == "throughput" and self.rel_floor >= 1:
            raise ConfigError(f"{where}: a throughput rel_floor must be below 1")


def _q(name, source, q, rel, abs_, **kw) -> MetricSpec:
    return MetricSpec(name=name, kind="quantile", source=source, quantile=q, rel_floor=rel, abs_floor=abs_, **kw)


def _r(name, events, rel, abs_, **kw) -> MetricSpec:
    return MetricSpec(name=name, kind="rate", events=tuple(events), rel_floor=rel, abs_floor=abs_,
                      min_samples=kw.pop("min_samples", 1000), **kw)


DEFAULT_METRICS: tuple[MetricSpec, ...] = (
    _q("e2e_latency_p50", "e2e_latency_ms", 0.50, 0.10, 0.5),
    _q("e2e_latency_p95", "e2e_latency_ms", 0.95, 0.10, 1.0),
    _q("e2e_latency_p99", "e2e_latency_ms", 0.99, 0.10, 2.0, critical=True, weight=2.0, slo=1000.0),
    _q("produce_latency_p99", "produce_latency_ms", 0.99, 0.10, 2.0),
    _r("produce_error_rate", ["produce_error"], 0.2, 0.002, critical=True, weight=2.0),
    _r("consume_error_rate", ["consume_error"], 0.2, 0.002, critical=True, weight=2.0),
    # An acknowledged message should never be lost: a couple of lost messages in a canary lane whose baseline
    # lost none is a regression, long before the lane comparison has enough events (see README).
    _r("loss_rate", ["lost"], 0.2, 0.0005, critical=True, weight=2.0, slo=0.01, tolerance=1e-7),
    _r("duplicate_rate", ["duplicate"], 0.5, 0.001, weight=0.5),
    _r("out_of_order_rate", ["out_of_order"], 0.5, 0.001, weight=0.5),
    _r("availability", FAILURES, 0.2, 0.002, critical=True, weight=2.0, slo=0.01, display_complement=True),
    MetricSpec(name="throughput", kind="throughput", direction="decrease", rel_floor=0.2, min_samples=1000),
    # Client-service observations: the same machinery; off the hook for probe runs (no data -> skipped).
    _q("processing_latency_p99", "processing_ms", 0.99, 0.10, 5.0, must_have_data=False),
    _r("processing_error_rate", ["processing_error"], 0.2, 0.002, must_have_data=False),
    _q("lag_p99", "lag", 0.99, 0.5, 100.0, must_have_data=False),
)


@dataclass(frozen=True)
class JudgeConfig:
    """alpha: the false-rollback budget of one run, shared by every test of every metric (Bonferroni)
    and valid at every interim look (anytime-valid e-processes). warmup_s: observations sent in the
    first seconds of the run are not compared (they seed the latency thresholds). bucket_s: the
    Spark job's time bucket. min_buckets: post-warm-up buckets needed before anything may pass.
    max_excluded_share: a run in which more than this share of the observations was excluded as bad data
    (malformed, clock skew, ...) is not promoted: INCONCLUSIVE, since the excluded part could hide a regression."""

    alpha: float = 0.01
    warmup_s: float = 30.0
    bucket_s: float = 10.0
    min_buckets: int = 3
    max_excluded_share: float = 0.05
    metrics: tuple[MetricSpec, ...] = field(default=DEFAULT_METRICS)

    @property
    def active(self) -> tuple[MetricSpec, ...]:
        return tuple(m for m in self.metrics if m.enabled)

    def validate(self) -> JudgeConfig:
        if not 0 < self.alpha < 0.5:
            raise ConfigError(f"judge alpha must be in (0, 0.5), got {self.alpha}")
        if self.warmup_s < 0 or self.bucket_s <= 0 or self.min_buckets < 1:
            raise ConfigError("judge warmup_s must be >= 0, bucket_s > 0, min_buckets >= 1")
        if not 0 <= self.max_excluded_share <= 1:
            raise ConfigError(f"judge max_excluded_share must be in [0, 1], got {self.max_excluded_share}")
        if not self.active:
            raise ConfigError("judge config enables no metric")
        for m in self.metrics:
            m.validate()
        return self

    def to_dict(self) -> dict:
        return {"alpha": self.alpha, "warmup_s": self.warmup_s, "bucket_s": self.bucket_s,
                "min_buckets": self.min_buckets, "max_excluded_share": self.max_excluded_share,
                "metrics": {m.name: _metric_dict(m) for m in self.metrics}}


def _metric_dict(m: MetricSpec) -> dict:
    d = asdict(m)
    d.pop("name")
    d["events"] = list(m.events)
    return d


_METRIC_FIELDS = {f.name: f for f in fields(MetricSpec)}
_GLOBAL_KEYS = ("alpha", "warmup_s", "bucket_s", "min_buckets", "max_excluded_share")
_GLOBAL_TYPES = {"alpha": "float", "warmup_s": "float", "bucket_s": "float", "min_buckets": "int",
                 "max_excluded_share": "float"}


def _type_problem(value, type_name: str) -> str | None:
    """What is wrong with `value` for a field annotated `type_name`, or None (YAML gives ints for floats)."""
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if type_name.endswith("| None"):
        return None if value is None else _type_problem(value, type_name.removesuffix("| None").strip())
    ok = {"float": number, "int": isinstance(value, int) and not isinstance(value, bool),
          "bool": isinstance(value, bool), "str": isinstance(value, str),
          "tuple[str, ...]": isinstance(value, list | tuple) and all(isinstance(v, str) for v in value)}.get(type_name)
    if ok is None or ok:
        return None
    wanted = {"float": "a number", "int": "a whole number", "bool": "true or false", "str": "a string",
              "tuple[str, ...]": "a list of strings"}[type_name]
    return f"must be {wanted}, got {value!r}"


def config_from_dict(data: dict | None) -> JudgeConfig:
    data = dict(data or {})
    version = data.pop("version", 1)
    if version != 1:
        raise ConfigError(f"judge config version {version!r} is not supported (expected 1)")
    unknown = sorted(set(data) - set(_GLOBAL_KEYS) - {"metrics"})
    if unknown:
        raise ConfigError(f"judge config has unknown keys {unknown}; known: {list(_GLOBAL_KEYS) + ['metrics']}")
    for key, type_name in _GLOBAL_TYPES.items():
        if key in data and (problem := _type_problem(data[key], type_name)):
            raise ConfigError(f"judge config {key} {problem}")
    metrics = {m.name: m for m in DEFAULT_METRICS}
    given = data.pop("metrics", None) or {}
    if not isinstance(given, dict):
        raise ConfigError(f"judge config metrics must be a mapping of metric name to fields, got {given!r}")
    for name, overrides in given.items():
        if not isinstance(overrides, dict):
            raise ConfigError(f"judge metric {name!r} must be a mapping of fields")
        bad = sorted(set(overrides) - set(_METRIC_FIELDS) - {"name"})
        if bad:
            raise ConfigError(f"judge metric {name!r} has unknown fields {bad}")
        for key, value in overrides.items():
            if key != "name" and (problem := _type_problem(value, str(_METRIC_FIELDS[key].type))):
                raise ConfigError(f"judge metric {name!r}: {key} {problem}")
        values: dict[str, Any] = {k: tuple(v) if k == "events" else v for k, v in overrides.items() if k != "name"}
        if name in metrics:
            metrics[name] = replace(metrics[name], **values)
        else:
            if "kind" not in values:
                raise ConfigError(f"new judge metric {name!r} needs a kind ({KINDS})")
            metrics[name] = MetricSpec(name=name, **values)
    try:
        config = JudgeConfig(metrics=tuple(metrics.values()), **{k: data[k] for k in _GLOBAL_KEYS if k in data})
    except TypeError as exc:
        raise ConfigError(f"judge config: {exc}") from exc
    return config.validate()


def load_config(path: str | Path | None) -> JudgeConfig:
    """The defaults when path is None; otherwise the YAML file merged over them."""
    if path is None:
        return JudgeConfig().validate()
    try:
        data = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"cannot read judge config {path}: {one_line(exc)}") from exc
    if data is not None and not isinstance(data, dict):
        raise ConfigError(f"judge config {path} must be a YAML mapping")
    return config_from_dict(data)
