"""The broker rollout spec: which cluster, what change, which canary brokers, how long to watch, how to judge.

    cluster:  {deployer: local, dir: /tmp/kc}          # the embedded local cluster
    change:   {version: 4.1.2, config: {num.io.threads: "6", log.cleaner.threads: null}}
    canary:   {count: 1, control: auto}                 # or {brokers: [2], control: [1]}; control: none
    probe:    {window: 2m, interim_interval: 30s, rate: 10}
    judge:    {config: judge.yaml, engine: spark}       # engine: spark (the Spark job) or inline
    finalize: true                                      # raise the feature levels in the finalize step, after
                                                        # promote.bake (the previous release can still join until then)
    promote:  {max_batch: 1, headroom: 0, drain: true,  # batches the guard proves safe, drained first; gated waves
               waves: auto, look: 1m, bake: 10m}        # (25%, 50%, all) with a look between; bake before finalize
    lead_topics: all                                    # the canary leads its preferred partitions of every topic
                                                        # (as a finished roll would); [orders]: these; none: the probe's
    capacity: required                                  # a PROMOTE needs representative traffic judged (not_required)
    traffic:  {tolerance: 0.5, min_bytes_per_s: 100000,  # the canary's fair share of client traffic; the user
               wait: 1m, catch_up_bytes: 1048576,       # topics' latest records read back from behind (0: not)
               catch_up_partitions: 2, catch_up_interval: 5s}
    fault:    {client_delay_ms: 200}                    # scenarios and tests only: make the canary bad
    broker_metrics: {interval: 5s}                      # or {prometheus: {url: …, brokers: {1: kafka-1}}}
    load:     {rate: auto, record_size: 1000}           # records/s per partition through every broker in the window
                                                        # (auto: what real traffic lacks to be representative; 0: none)

`load_spec` reads YAML or JSON and checks every field before anything is touched, through one typed model per
section (`BrokerRolloutSpec`, the place of every rule: ranges, defaults, cross-field checks); all problems are
reported at once, each naming its field and saying what to fix. The steps read that model as it is. Checks that
need the cluster (broker ids exist, the canary leaves a baseline) happen in preflight, still before any change.
The cluster's client settings are `cluster.client`, with the KAFKA_CANARY_CLIENT_<KEY> variables of `environ` added
(canary.rollout.core.spec).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, PlainValidator, WithJsonSchema, field_validator, model_validator

from canary.cluster.node_config import is_managed
from canary.fields import (
    BrokerId,
    ConfigKey,
    ConfigValue,
    Duration,
    KafkaVersion,
    Matching,
    Name,
    RunId,
    TopicName,
    format_duration,
)
from canary.kafka.secrets import redacted, refuse_credentials
from canary.rollout.core.spec import (
    DAY,
    ClusterSection,
    JudgeSection,
    SpecIdentity,
    SpecSection,
    interim_within,
    section,
    stored_cluster,
    validated,
    with_environment,
)


def _not_managed(key: str) -> str:
    if is_managed(key):
        raise ValueError("managed by the deployer (the canary marker travels in broker.rack; listeners, ids and "
                         "storage are the cluster's own) and cannot be changed by a rollout")
    return key


class ChangeSection(SpecSection):
    version: KafkaVersion | None = None          # target Kafka version; None keeps each broker's version
    # broker overrides (one-line values; null removes one); the deployer's own keys are out of reach
    config: dict[Annotated[ConfigKey, AfterValidator(_not_managed)], ConfigValue] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _says_something(self) -> ChangeSection:
        if self.version is None and not self.config:
            raise ValueError("say what changes: a target version (change.version) and/or broker config overrides "
                             "(change.config)")
        return self


# auto: one control broker when the cluster has one to spare (canary.rollout.broker.control); none; or these ids.
Control = Literal["auto", "none"] | Annotated[list[BrokerId], Field(min_length=1)]


class CanarySection(SpecSection):
    count: int | None = Field(None, strict=True, ge=1)                    # exactly one of count / brokers
    brokers: list[BrokerId] | None = Field(None, min_length=1, json_schema_extra={"uniqueItems": True})
    # Baseline brokers restarted with nothing changed beside the canary, which its broker metrics are compared with
    control: Control = "auto"

    @field_validator("brokers", "control")
    @classmethod
    def _each_once(cls, brokers: Any) -> Any:
        if isinstance(brokers, list):
            twice = sorted({b for b in brokers if brokers.count(b) > 1})
            if twice:
                raise ValueError(f"broker ids {twice} are listed twice")
        return brokers

    @model_validator(mode="after")
    def _one_of(self) -> CanarySection:
        if (self.count is None) == (self.brokers is None):
            raise ValueError("give exactly one of canary.count (how many brokers) or canary.brokers (their ids)")
        both = sorted(set(self.brokers or ()) & set(self.control if isinstance(self.control, list) else ()))
        if both:
            raise ValueError(f"brokers {both} are listed as canary and as control; a control broker runs unchanged")
        return self


class ProbeSection(SpecSection):
    window: Annotated[float, Duration(10, DAY)] = 120.0            # seconds of probe traffic judged
    interim_interval: Annotated[float, Duration(5, DAY)] = 30.0    # seconds between interim looks (fail fast)
    rate: float = Field(20.0, strict=True, ge=0.1, le=10_000)      # messages/s per partition (data in 2 min)
    preflight: Annotated[float, Duration(2, 600)] = 10.0           # the green probes: preflight, verify, finalize
    # Preflight's probe runs at least this long: each broker's latency before the change, which the window's latency
    # quantiles are calibrated by (canary/judge/README.md; p99 needs about 30 s at 20 msg/s per partition).
    calibration: Annotated[float, Duration(0, 600)] = 30.0

    @model_validator(mode="after")
    def _interim_within_window(self) -> ProbeSection:
        interim_within(self.window, self.interim_interval)
        return self


class FaultSection(SpecSection):
    """Deliberate faults brokers get with the change (scenarios and tests). `on`: the canary brokers (the change hurts
    wherever it runs), or the brokers promoted after the verdict (a change whose harm shows only beyond the canary:
    what the looks between promotion waves are for)."""
    client_delay_ms: float = Field(0.0, strict=True, ge=0, le=60_000)  # a delaying proxy before each such broker
    on: Literal["canary", "promoted"] = "canary"


class TimeoutsSection(SpecSection):
    warm_up: Annotated[float, Duration(10, DAY)] = 300.0   # a canary broker rejoining every ISR
    guard: Annotated[float, Duration(0, DAY)] = 300.0      # the safe-roll guard allowing a restart
    pause: Annotated[float, Duration(0, 7 * DAY)] = DAY    # a promotion paused between waves, until it gives up


def _no_credentials(url: str) -> str:
    """Refuses user:password@ in a URL without quoting it: the spec lands in run.json and reports."""
    return refuse_credentials(url, "put an Authorization header in $KAFKA_CANARY_PROMETHEUS_AUTHORIZATION")


class PrometheusSection(SpecSection):
    """A Prometheus that scrapes the brokers (their JMX exporter's series): queried over its HTTP API. Credentials
    come from $KAFKA_CANARY_PROMETHEUS_AUTHORIZATION (an Authorization header), never from the spec."""

    url: Annotated[str, AfterValidator(_no_credentials),
                   Matching(r"^https?://[^\s/]+(/\S*)?$", "an http(s) URL of the Prometheus server")]
    broker_label: Name = "broker"                                   # the label naming a broker on its series
    # broker id -> that label's value
    brokers: dict[Annotated[int, Field(strict=False, ge=0)], Annotated[str, Field(min_length=1, max_length=200)]]
    window: Annotated[str, Matching(r"^[1-9][0-9]{0,4}[smh]$", "a Prometheus duration such as 30s or 1m")] = "30s"

    @field_validator("brokers")
    @classmethod
    def _some(cls, brokers: dict[int, str]) -> dict[int, str]:
        if not brokers:
            raise ValueError("map each broker id to the value of broker_label on its series, e.g. {1: kafka-1}")
        return brokers


ExporterUrl = Annotated[str, AfterValidator(_no_credentials),
                       Matching(r"^https?://[^\s/]+$", "the http://host:port of a broker's JMX exporter agent "
                                                       "(/metrics is added)")]


class BrokerMetricsSection(SpecSection):
    """Each broker's own metrics, read during the window beside the probe: from the deployer (the metrics agents of
    the brokers we start), from the brokers' own JMX exporter agents (`exporters`, with the rules of
    canary/cluster/resources/jmx-exporter.yaml) or from `prometheus`. enabled: false judges the probe alone."""

    enabled: bool = Field(True, strict=True)
    interval: Annotated[float, Duration(1, 300)] = 5.0              # seconds between readings
    prometheus: PrometheusSection | None = None
    exporters: dict[Annotated[int, Field(strict=False, ge=0)], ExporterUrl] | None = None  # broker id -> agent

    @model_validator(mode="after")
    def _one_source(self) -> BrokerMetricsSection:
        if self.prometheus is not None and self.exporters is not None:
            raise ValueError("give prometheus or exporters, not both")
        if self.exporters == {}:
            raise ValueError("exporters: map each broker id to its agent's http://host:port")
        return self


MAX_LOAD_RATE = 100_000


def _load_rate(value: object) -> float | str:
    if value == "auto":
        return "auto"
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= MAX_LOAD_RATE:
        raise ValueError(f"{value!r} must be records/s per partition from 0 (no load) to {MAX_LOAD_RATE}, or auto "
                         f"(what the cluster's own traffic lacks to be representative, sized in preflight)")
    return float(value)


# A number, or the one word `auto`: the range binds numbers only and the pattern strings only (JSON Schema).
LoadRate = Annotated[float | Literal["auto"], PlainValidator(_load_rate),
                     WithJsonSchema({"type": ["number", "string"], "minimum": 0, "maximum": MAX_LOAD_RATE,
                                     "pattern": "^auto$"})]


class LoadSection(SpecSection):
    """Load through canary and baseline brokers alike during the window (canary.probe.load): records per second
    into each partition of the load topic (0: no load; `auto`: what the cluster's own client traffic lacks to be
    representative, sized in preflight from the brokers' metrics by canary.probe.load_sizing, at most
    `ceiling_bytes_per_s` per broker) of `record_size` bytes, acks=all, batched."""

    rate: LoadRate = "auto"
    record_size: int = Field(1000, strict=True, ge=1, le=1_000_000)
    ceiling_bytes_per_s: float = Field(2_000_000.0, gt=0, le=1e9)


class TrafficSection(SpecSection):
    """The canary's share of the cluster's client traffic (canary.rollout.broker.traffic), from the brokers' own
    metrics: client bytes in and out and produce requests per second, each canary broker against the median baseline
    broker. Fair: every measure within `tolerance` of the baseline's (0.5: from half to one and a half times).
    Representative: the baseline brokers take at least `min_bytes_per_s` of client bytes in each (below it the
    brokers' capacity metrics measure an idle broker); the window's load counts. After its elections the lead step
    waits up to `wait` for a fair share before the window starts.
    Catch-up reads (canary.probe.user_reads): every `catch_up_interval` of the window, `catch_up_bytes` of each
    of `catch_up_partitions` user-topic partitions every broker leads are read back from behind, and how fast each
    leader delivered them is judged (a fetch path that lost its capacity, invisible to consumers that keep up);
    `catch_up_bytes: 0` reads nothing."""

    tolerance: float = Field(0.5, gt=0, lt=1)
    min_bytes_per_s: float = Field(100_000.0, ge=0, le=1e12)
    wait: Annotated[float, Duration(0, 3600)] = 60.0
    catch_up_bytes: int = Field(1024 * 1024, strict=True, ge=0, le=1024 * 1024 * 1024)
    catch_up_partitions: int = Field(2, strict=True, ge=1, le=100)
    catch_up_interval: Annotated[float, Duration(1, 300)] = 5.0


_WAVE = re.compile(r"^(all|([1-9][0-9]?|100)%)$")
MAX_WAVES = 6


def _waves(value: object) -> str | list[str]:
    """`auto`, or growing cumulative shares of the brokers ("25%", …), "all" only last."""
    if value == "auto":
        return "auto"
    shown = ' such as ["25%", "50%", "all"]'
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and _WAVE.match(v) for v in value):
        raise ValueError(f"must be auto, or a list of growing shares of the brokers (1% to 100%) or all,{shown}; "
                         f"got {value!r}")
    if len(value) > MAX_WAVES:
        raise ValueError(f"at most {MAX_WAVES} waves (the Airflow DAG has a task for each), got {len(value)}")
    if "all" in value[:-1]:
        raise ValueError(f'"all" can only be the last wave,{shown}')
    shares = [float(v.rstrip("%")) for v in value if v != "all"]
    if shares != sorted(set(shares)):
        raise ValueError(f"each wave must be a larger share of the brokers than the one before,{shown}; got {value}")
    return list(value)


# `auto`, or the waves' cumulative shares (canary.rollout.broker.waves).
Waves = Annotated[str | list[str], PlainValidator(_waves),
                  WithJsonSchema({"anyOf": [{"const": "auto"}, {"type": "array", "minItems": 1, "items": {
                      "type": "string", "pattern": _WAVE.pattern}}]})]


class PromoteSection(SpecSection):
    """How the rest of the fleet is rolled after a PROMOTE verdict (canary.rollout.broker.batches): up to
    `max_batch` brokers of one rack restart together when the safe-roll guard on the set proves every partition keeps
    min.insync.replicas plus `headroom` while they are all away; 1, the default, rolls one broker at a time.
    `drain`: before a batch stops, the leadership of its partitions moves to brokers that stay up (no data moves),
    and comes back once it is in every ISR again. `waves`: the batches in gated waves, each a cumulative share of
    the brokers ("25%", …, "all"), with a `look` after each wave but the last that puts the promoted brokers against
    those not yet promoted on the run's judge (a regression rolls the promoted waves back); `auto`: 25 %, 50 %, all
    from six brokers on, one wave below (canary.rollout.broker.waves). `bake`: how long the promoted fleet runs
    before the finalize step may raise the feature levels (irreversible)."""

    max_batch: int = Field(1, strict=True, ge=1, le=1000)
    headroom: int = Field(0, strict=True, ge=0, le=10)
    drain: bool = Field(True, strict=True)
    waves: Waves = "auto"
    look: Annotated[float, Duration(0, 3600)] = 60.0
    bake: Annotated[float, Duration(0, 7 * DAY)] = 600.0


# all: every topic, as a finished roll would lead them; a list: the probe's and these; none: the probe's alone.
LeadTopics = Literal["all", "none"] | list[TopicName]
# required: a PROMOTE whose window had no representative traffic through a fairly loaded canary is INCONCLUSIVE.
Capacity = Literal["required", "not_required"]


class BrokerRolloutSpec(SpecSection, SpecIdentity):
    """The broker rollout spec, as written and validated; the steps read it as it is."""
    cluster: ClusterSection = section()
    change: ChangeSection = section()
    canary: CanarySection = section()
    probe: ProbeSection = section()
    judge: JudgeSection = section()
    finalize: bool = Field(True, strict=True)
    lead_topics: LeadTopics = "all"      # whose partitions the canary brokers lead (their preferred ones)
    capacity: Capacity = "required"
    traffic: TrafficSection = section()
    fault: FaultSection = section()
    timeouts: TimeoutsSection = section()
    broker_metrics: BrokerMetricsSection = section()
    load: LoadSection = section()
    promote: PromoteSection = section()
    run_id: RunId | None = None

    @property
    def client(self) -> dict[str, str]:
        """The librdkafka settings every client of the rollout uses."""
        return self.cluster.client

    @model_validator(mode="after")
    def _window_can_promote(self) -> BrokerRolloutSpec:
        """A window too short for the judge to pass could only end INCONCLUSIVE after a canary restart: refused."""
        partitions = self.canary.count or len(self.canary.brokers or ())   # the probe: one partition per broker
        needed, why = self.judge.settings().window_needed(self.probe.rate * partitions)
        if self.probe.window < needed:
            raise ValueError(
                f"probe.window {format_duration(self.probe.window)} can never promote: at {self.probe.rate:g} msg/s "
                f"per partition through the canary's {partitions} probe partition(s) the judge needs {why}; make "
                f"the window at least {format_duration(math.ceil(needed))}, or raise probe.rate")
        return self

    def to_dict(self) -> dict[str, Any]:
        """The spec as run.json has kept it since its schema 1, secrets masked. A resumed run compares it and a
        derived run id hashes it, so its keys stay as they are: a run.json written earlier must still match."""
        return {
            "cluster_dir": self.cluster.dir, "cluster": stored_cluster(self.cluster),
            "change": self.change.model_dump(), "canary_count": self.canary.count,
            "canary_brokers": list(self.canary.brokers or ()), "deployer": self.cluster.deployer,
            "client": redacted(self.client), "window": self.probe.window,
            "interim_interval": self.probe.interim_interval, "probe_rate": self.probe.rate,
            "preflight_probe": self.probe.preflight, "calibration_probe": self.probe.calibration,
            "judge_config": self.judge.config, "engine": self.judge.engine, "finalize": self.finalize,
            "lead_topics": self.lead_topics, "capacity": self.capacity,
            "traffic": _stored(self.traffic, since_schema_1=("tolerance", "min_bytes_per_s", "wait")),
            "fault": _stored(self.fault, since_schema_1=("client_delay_ms",)), "warm_up_timeout": self.timeouts.warm_up,
            "guard_timeout": self.timeouts.guard, "broker_metrics": self.broker_metrics.model_dump(),
            "load": self.load.model_dump(), "run_id": self.run_id,
            # Kept only when not the default, so a spec stored before the control existed hashes as it did.
            **({"canary_control": self.canary.control} if self.canary.control != "auto" else {}),
            **({"promote": _stored(self.promote, since_schema_1=("max_batch", "headroom", "bake"))}
               if self.promote != PromoteSection.model_validate({}) else {}),
            **({"pause_timeout": self.timeouts.pause} if self.timeouts.pause != DAY else {})}


def _stored(section: SpecSection, since_schema_1: tuple[str, ...]) -> dict[str, Any]:
    """A section as run.json keeps it: the fields it has always had, and a field added since only when not at its
    default, so a spec stored before that field existed compares and hashes as it did."""
    defaults = type(section).model_validate({})
    return {k: v for k, v in section.model_dump().items()
            if k in since_schema_1 or getattr(section, k) != getattr(defaults, k)}


def load_spec(source: str | Path | dict, environ: Mapping[str, str] | None = None) -> BrokerRolloutSpec:
    """A spec from a YAML/JSON file or a mapping; raises SpecError naming every bad field. With `environ`, its
    KAFKA_CANARY_CLIENT_<KEY> variables add or override the cluster's client settings."""
    spec = validated(BrokerRolloutSpec, source)
    cluster = spec.cluster.model_copy(update={"client": with_environment(spec.cluster.client, environ)})
    return spec.model_copy(update={"cluster": cluster})
