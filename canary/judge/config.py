"""Judge configuration: the metrics compared, their floors and roles, and the global error budget.

`load_config(path)` reads a YAML file (format in canary/judge/README.md) and merges it over
`DEFAULT_METRICS`; a metric named in the file replaces only the fields it sets, a new name adds a
metric, `enabled: false` drops one. Everything is validated here so the judge never sees a bad value.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

import yaml
from pydantic import AfterValidator, Field, ValidationError, field_validator, model_validator

from canary.broker_metrics.catalogue import UNITS
from canary.errors import ConfigError, one_line
from canary.fields import SpecModel, problems
from canary.files import read_spec_file, shown_path
from canary.observations import NO_OUTPUT, OUTCOMES

# Histogram sources the Spark job produces (see canary/analysis/job.py).
Source = Literal["e2e_latency_ms", "produce_latency_ms", "processing_ms", "lag"]
SOURCES: tuple[str, ...] = get_args(Source)
BROKER_SOURCES: tuple[str, ...] = tuple(UNITS)  # broker metrics: the catalogue's and the load's names
FAILURES = ("produce_error", "lost", "consume_error")


Kind = Literal["rate", "quantile", "throughput", "broker"]
Per = Literal["requests", "bytes"]          # canary.broker_metrics.catalogue.WORK
Compare = Literal["lanes", "before"]
# A rate's denominator (canary.judge.aggregates.Window.among).
Among = Literal["all", "processed", "produced", "output_counted"]
Direction = Literal["increase", "decrease"]  # which change is bad


def _outcome(event: str) -> str:
    if event not in (*OUTCOMES, NO_OUTPUT):
        raise ValueError(f"{event!r} is not an outcome; use one of {', '.join(OUTCOMES)} (or {NO_OUTPUT})")
    return event


Number = Annotated[float, Field(strict=True)]   # YAML's 1 and 1.0 alike; never the text "1"


class MetricSpec(SpecModel):
    """One compared metric.

    kind: `rate` (share of messages whose outcome is in `events`), `quantile` (the `quantile` of
    histogram `source`), `throughput` (acknowledged messages per partition-second), `broker` (the broker metric
    `source`, canary brokers against the baseline brokers; min_samples counts readings).
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
    per: broker metrics only: the value at each reading divided by the broker's work then (`requests`: produce
    and fetch requests, in 1000/s; `bytes`: client bytes in and out, in MB/s), so a broker that does less cannot
    look healthier for it. compare: broker metrics only: `lanes` (canary brokers against baseline brokers) or
    `before` (the baseline brokers against their own readings before the change: harm the change does to the
    brokers it does not run on). among: rate metrics only: the observations the share is of (`all`; `processed`:
    the records a service processed; `produced`: the records produced, acknowledged or not; `output_counted`: the
    records processed whose outputs were counted, canary.clients.outputs). settle_s: broker
    metrics only: their readings start this much later than the window's warm-up ends (a just-restarted broker
    spends more per request for its first minute). span_s: broker metrics only: each reading is judged as the
    broker's mean over the readings of the last `span_s` seconds (a counter whose events come in bursts, such as log
    flushes as segments roll, reads 0 at most readings and a burst at a few).
    """

    name: str
    kind: Kind
    source: Annotated[str, Field(strict=True)] = ""  # quantile: one of SOURCES; broker: one of BROKER_SOURCES
    events: tuple[Annotated[str, AfterValidator(_outcome)], ...] = ()
    quantile: Annotated[float, Field(strict=True, gt=0, lt=1)] = 0.99
    direction: Direction = "increase"
    rel_floor: Annotated[float, Field(strict=True, ge=0)] = 0.0
    abs_floor: Annotated[float, Field(strict=True, ge=0)] = 0.0
    critical: Annotated[bool, Field(strict=True)] = False
    must_have_data: Annotated[bool, Field(strict=True)] = True
    weight: Annotated[float, Field(strict=True, ge=0)] = 1.0
    min_samples: Annotated[int, Field(strict=True, ge=1)] = 500
    slo: Number | None = None
    tolerance: Annotated[float, Field(strict=True, gt=0, lt=0.5)] | None = None
    display_complement: Annotated[bool, Field(strict=True)] = False
    enabled: Annotated[bool, Field(strict=True)] = True
    per: Per | None = None            # broker metrics: judged per unit of this work (catalogue WORK)
    compare: Compare = "lanes"        # broker metrics: `before`, the baseline brokers against themselves
    settle_s: Annotated[float, Field(strict=True, ge=0)] = 0.0  # broker metrics: readings left out after the warm-up
    span_s: Annotated[float, Field(strict=True, ge=0)] = 0.0    # broker metrics: each reading a mean over this span
    among: Among = "all"              # rate metrics: the observations the share is of

    @model_validator(mode="after")
    def _fits_its_kind(self) -> MetricSpec:
        if problem := _kind_problem(self):
            raise ValueError(problem)
        return self


def _kind_problem(m: MetricSpec) -> str | None:
    """What a metric's fields say that its kind cannot mean, or None."""
    if m.kind == "quantile":
        if m.source not in SOURCES:
            return f"a quantile metric needs a source: one of {', '.join(SOURCES)}"
        if m.direction != "increase":
            return "quantile metrics regress upwards; direction must be 'increase'"
    if m.kind == "broker":
        if m.source not in BROKER_SOURCES:
            return f"a broker metric needs a source: a broker metric's name ({', '.join(BROKER_SOURCES)})"
        if m.slo is not None:
            return "broker metrics have no slo guard"
    else:
        if m.per is not None or m.compare != "lanes" or m.settle_s or m.span_s:
            return f"per, compare, settle_s and span_s are for broker metrics, not {m.kind}"
        if m.source and m.kind != "quantile":
            return f"source is for quantile and broker metrics, not {m.kind}"
    if m.kind == "rate":
        if not m.events:
            return f"a rate metric needs events: outcomes from {', '.join(OUTCOMES)}"
        if m.direction != "increase":
            return "rate metrics count bad outcomes; direction must be 'increase' (use display_complement for a " \
                   "success share)"
    if m.among != "all" and m.kind != "rate":
        return f"among is for rate metrics, not {m.kind}"
    if m.tolerance is not None and m.kind != "rate":
        return "tolerance is for rate metrics"
    if m.kind == "throughput":
        if m.direction != "decrease":
            return "throughput regresses downwards; direction must be 'decrease'"
        if m.slo is not None:
            return "throughput has no slo guard (use availability)"
        if m.rel_floor >= 1:
            return "a throughput rel_floor must be below 1"
    return None


def _q(name, source, q, rel, abs_, **kw) -> MetricSpec:
    return MetricSpec(name=name, kind="quantile", source=source, quantile=q, rel_floor=rel, abs_floor=abs_, **kw)


def _r(name, events, rel, abs_, **kw) -> MetricSpec:
    return MetricSpec(name=name, kind="rate", events=tuple(events), rel_floor=rel, abs_floor=abs_,
                      min_samples=kw.pop("min_samples", 1000), **kw)


SETTLE_S = 45.0  # effort per unit of work: judged from 45 s after the window's warm-up (75 s after it starts)
SPAN_S = 20.0    # a bursty counter: each reading judged as the mean of the last 20 s of readings


def _b(source: str, direction: Direction, rel: float, abs_: float, name: str = "", **kw) -> MetricSpec:
    # Critical: a broker shown worse beyond its floors at an interim look rolls back then (its test is anytime-valid,
    # and every minute more of the window's load on a broker that lost capacity is harm for nothing).
    return MetricSpec(name=name or f"broker_{source}", kind="broker", source=source, direction=direction,
                      rel_floor=rel, abs_floor=abs_, min_samples=3, must_have_data=False, critical=True, **kw)


DEFAULT_METRICS: tuple[MetricSpec, ...] = (
    # Tails float between brokers by about a quarter over minutes even with no change (bench/aa_real.py), more than
    # a preflight calibration can follow: their floors sit above that; the calibrated median keeps a tight one.
    _q("e2e_latency_p50", "e2e_latency_ms", 0.50, 0.10, 0.5),
    _q("e2e_latency_p95", "e2e_latency_ms", 0.95, 0.30, 2.0),
    _q("e2e_latency_p99", "e2e_latency_ms", 0.99, 0.30, 5.0, critical=True, weight=2.0, slo=1000.0),
    _q("produce_latency_p99", "produce_latency_ms", 0.99, 0.30, 5.0),
    _r("produce_error_rate", ["produce_error"], 0.2, 0.002, critical=True, weight=2.0, among="produced"),
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
    # Of the records the service processed, not of every observation (its produced records are not processing).
    _r("processing_error_rate", ["processing_error"], 0.2, 0.002, must_have_data=False, among="processed"),
    # Silent loss: a record processed, committed and never written on (a consume-transform-produce service that
    # drops 1 % of its records, counting neither an error nor a loss anywhere else). Critical: it is loss.
    _r("dropped_rate", [NO_OUTPUT], 0.2, 0.002, must_have_data=False, among="output_counted", critical=True,
       weight=2.0),
    _q("lag_p99", "lag", 0.99, 0.5, 100.0, must_have_data=False),
    # Each broker's own metrics (canary.broker_metrics), canary brokers against the baseline brokers: what a change
    # that cuts capacity moves under load. Floors well above how much healthy brokers differ (README).
    # Effort is judged per unit of work, so a broker that does less cannot look healthier for it: idle shares as
    # busy shares per 1000 requests/s (twice as busy for the same requests: half the headroom), CPU per MB of client
    # bytes. Healthy brokers of one cluster agree within about a third on each (docs/bench.md).
    # A just-restarted broker spends 2-5x as much per request for half a minute to over a minute (a cold JVM and
    # page cache, every client reconnecting; bench/capacity_eval.py, no-op): effort is judged once it settled.
    _b("request_handler_idle_ratio", "decrease", 1.0, 0.005, "broker_request_handler_busy_per_request",
       per="requests", settle_s=SETTLE_S),
    _b("network_processor_idle_ratio", "decrease", 1.0, 0.003, "broker_network_processor_busy_per_request",
       per="requests", settle_s=SETTLE_S),
    # Kafka's percentiles decay over minutes, so a broker slower at its tail for a while stays so for a whole window:
    # with one control broker, healthy brokers' produce p99 stood 55-64 % apart in 4 of about 70 no-op rollouts
    # (each rolled back at +50 %), while the harmful changes it caught stood 67-168 % apart, each caught by another
    # metric too (log flushes, catch-up reads, the load's consume p99; docs/bench.md).
    _b("produce_total_time_p99_ms", "increase", 1.0, 10.0),
    # The time a broker spends appending a produce request to its log, its mean over each reading's interval (Kafka
    # keeps whole milliseconds): flushing every message or recompressing every batch raises it (1 -> 2-3 ms under
    # load) while the request's total time hides it behind replication.
    _b("produce_local_time_mean_ms", "increase", 0.5, 0.5),
    # How often the broker forces its log to disk. By default Kafka leaves that to the OS (no flush in a window);
    # a flush per message or per millisecond costs a fleet half its produce throughput (bench/capacity_truth.py)
    # while it costs the canary at a moderate load only a third more CPU, within the CPU floor. A segment is flushed
    # as it rolls: 1 MiB segments (a third less produce on a fleet) read about 2/s at the traffic of make demo and
    # about 0.55/s at an idle cluster's safe load, their flushes in bursts (every partition rolls at about the same
    # time): judged over 20 s of readings, where a reading of a few seconds holds a burst or nothing.
    _b("log_flushes_per_s", "increase", 1.0, 0.25, span_s=SPAN_S),
    _b("fetch_consumer_local_time_p99_ms", "increase", 1.0, 10.0),
    _b("cpu_seconds_per_s", "increase", 1.0, 0.05, "broker_cpu_per_byte", per="bytes", settle_s=SETTLE_S),
    # Harm that lands on the brokers the change does not run on: a canary that is a slow follower holds up every
    # acks=all write its leaders wait for; one that floods its peers with requests queues theirs. The baseline
    # brokers' produce time, its mean over each reading's interval, against their own readings before the change.
    _b("produce_total_time_mean_ms", "increase", 1.0, 5.0, "baseline_produce_total_time_mean_ms", compare="before"),
    # The window's load measures its produce latency through each broker's partition (with `load` in the spec)...
    _b("load_produce_latency_p50_ms", "increase", 0.5, 5.0),
    _b("load_produce_latency_p99_ms", "increase", 0.5, 20.0),
    # ... and how long its records take to reach its consumer: a broker slow to serve fetches shows here.
    _b("load_consume_latency_p99_ms", "increase", 0.5, 20.0),
    # ... and how fast a consumer that is behind reads a broker's partition back: a broker that caps its fetch
    # responses serves a consumer at the head of the log as before and one catching up at about half the speed.
    _b("load_catch_up_bytes_per_s", "decrease", 0.3, 1e6),
    # Without load, the window reads a bounded volume of the user topics back from behind (canary.probe.user_reads):
    # the same measure on the cluster's own records. Tiny socket buffers and capped fetch responses show here at any
    # traffic rate, while consumers at the head of the log keep up.
    _b("catch_up_bytes_per_s", "decrease", 0.3, 1e6),
)


class JudgeConfig(SpecModel):
    """alpha: the false-rollback budget of one run, shared by every test of every metric (Bonferroni)
    and valid at every interim look (anytime-valid e-processes). warmup_s: observations sent in the
    first seconds of the run are not compared (they seed the latency thresholds). bucket_s: the
    Spark job's time bucket. min_buckets: post-warm-up buckets needed before anything may pass.
    max_excluded_share: a run in which more than this share of the observations was excluded as bad data
    (malformed, clock skew, ...) is not promoted: INCONCLUSIVE, since the excluded part could hide a regression.
    metrics: every metric by name, complete (`config_from_dict` merges a file's over the defaults).
    control_brokers: see below."""

    version: Annotated[Literal[1], Field(exclude=True)] = 1  # the config format's version
    alpha: Annotated[float, Field(strict=True, gt=0, lt=0.5)] = 0.01
    warmup_s: Annotated[float, Field(strict=True, ge=0)] = 30.0
    bucket_s: Annotated[float, Field(strict=True, gt=0)] = 10.0
    min_buckets: Annotated[int, Field(strict=True, ge=1)] = 3
    max_excluded_share: Annotated[float, Field(strict=True, ge=0, le=1)] = 0.05
    metrics: dict[str, MetricSpec] = Field(default_factory=lambda: {m.name: m for m in DEFAULT_METRICS})
    # Set by a broker rollout, not in a file: its control brokers (baseline brokers restarted with nothing changed,
    # canary.rollout.broker.control), which the canary's broker metrics are compared with (canary.judge.brokers).
    control_brokers: list[Annotated[int, Field(strict=True, ge=0)]] = Field(default_factory=list)

    @field_validator("metrics")
    @classmethod
    def _named_and_enabled(cls, metrics: dict[str, MetricSpec]) -> dict[str, MetricSpec]:
        wrong = sorted(name for name, m in metrics.items() if m.name != name)
        if wrong:
            raise ValueError(f"metrics {wrong} carry another name than their key")
        if not any(m.enabled for m in metrics.values()):
            raise ValueError("enables no metric")
        return metrics

    @property
    def active(self) -> tuple[MetricSpec, ...]:
        return tuple(m for m in self.metrics.values() if m.enabled)

    def window_needed(self, per_s: float) -> tuple[float, str]:
        """The shortest window in which a lane that gets `per_s` observations a second can pass at all, and what sets
        it: the warm-up, then `min_buckets` buckets and the min_samples of every metric that must have data."""
        counted = [m for m in self.active if m.must_have_data and m.kind != "broker"]
        buckets_s = self.min_buckets * self.bucket_s
        most = max(counted, key=lambda m: m.min_samples, default=None)
        if most is None or most.min_samples / per_s <= buckets_s:
            return self.warmup_s + buckets_s, f"{self.min_buckets} buckets of {self.bucket_s:g}s after its " \
                                              f"{self.warmup_s:g}s warm-up"
        return self.warmup_s + most.min_samples / per_s, (
            f"{most.min_samples} observations per lane after its {self.warmup_s:g}s warm-up ({most.name}'s "
            f"min_samples)")

    def changed(self, **changes: Any) -> JudgeConfig:
        """This config with `changes` (metrics: the complete set), validated again."""
        return JudgeConfig.model_validate({**dict(self), **changes})

    def to_dict(self) -> dict:
        """The config as a file says it (config_from_dict gives it back)."""
        return self.model_dump(mode="json", exclude={"metrics": {"__all__": {"name"}}})


def merged(*layers: Mapping[str, Any] | None) -> dict[str, Any]:
    """Judge config mappings merged in order, later ones winning; metrics merge per name and field, so a layer
    names only what it changes."""
    data: dict[str, Any] = {}
    metrics: dict[Any, Any] = {}
    for layer in layers:
        layer = dict(layer or {})
        given = layer.pop("metrics", None) or {}
        if not isinstance(given, Mapping):
            raise ConfigError(f"judge config: metrics must be a mapping of metric name to fields, got {given!r}")
        for name, fields in given.items():
            base = metrics.get(name)
            # a metric that is not a mapping is kept as given, for the model to name it
            metrics[name] = {**base, **fields} if isinstance(base, dict) and isinstance(fields, Mapping) else fields
        data.update(layer)
    return {**data, "metrics": metrics} if metrics else data


_DEFAULTS = {"metrics": {m.name: m.model_dump() for m in DEFAULT_METRICS}}


def config_from_dict(data: Mapping[str, Any] | None) -> JudgeConfig:
    """A judge config mapping (canary/judge/README.md) merged over the defaults; ConfigError names every problem."""
    if data is not None and not isinstance(data, Mapping):
        raise ConfigError(f"judge config must be a mapping (canary/judge/README.md), got {type(data).__name__}")
    complete = merged(_DEFAULTS, data)
    for name, fields in complete["metrics"].items():
        if isinstance(fields, dict):  # the key names the metric
            fields["name"] = name
    try:
        return JudgeConfig.model_validate(complete)
    except ValidationError as exc:
        raise ConfigError(ConfigError.PREFIX + "; ".join(problems(exc, JudgeConfig))) from None


def read_config_file(path: str | Path) -> dict[str, Any]:
    """A judge config file's mapping (empty file: {}); ConfigError when it cannot be read or is not a mapping."""
    try:  # within a size limit, no aliases, no duplicate keys (canary.files)
        data = read_spec_file(path, "a judge config (YAML)")
    except (OSError, ValueError, yaml.YAMLError) as exc:  # ValueError: too large, no regular file
        raise ConfigError(f"cannot read judge config {shown_path(path)}: {one_line(exc)}") from exc
    if data is not None and not isinstance(data, dict):
        raise ConfigError(f"judge config {path} must be a YAML mapping")
    return data or {}


def load_config(path: str | Path | None) -> JudgeConfig:
    """The defaults when path is None; otherwise the YAML file merged over them."""
    return JudgeConfig() if path is None else config_from_dict(read_config_file(path))
