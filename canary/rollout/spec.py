"""The rollout spec: which cluster, what change, which canary brokers, how long to watch, how to judge.

    cluster:  {deployer: local, dir: /tmp/kc}          # the embedded local cluster
    change:   {version: 4.1.2, config: {num.io.threads: "6", log.cleaner.threads: null}}
    canary:   {count: 1}                                # or {brokers: [2]}
    probe:    {window: 2m, interim_interval: 30s, rate: 10}
    judge:    {config: judge.yaml, engine: spark}       # engine: spark (the Spark job) or inline
    finalize: true
    lead_topics: all                                    # the canary leads its preferred partitions of every topic
                                                        # (as a finished roll would); [orders]: these; none: the probe's
    capacity: required                                  # a PROMOTE needs representative traffic judged (not_required)
    traffic:  {tolerance: 0.5, min_bytes_per_s: 100000, wait: 1m}   # the canary's fair share of client traffic
    fault:    {client_delay_ms: 200}                    # scenarios and tests only: make the canary bad
    broker_metrics: {interval: 5s}                      # or {prometheus: {url: …, brokers: {1: kafka-1}}}
    load:     {rate: auto, record_size: 1000}           # records/s per partition through every broker in the window
                                                        # (auto: what real traffic lacks to be representative; 0: none)

`load_spec` reads YAML or JSON and checks every field before anything is touched, through one typed model per
section (`BrokerRolloutModel`, the place of every rule: ranges, defaults, cross-field checks); all problems are
reported at once, each naming its field and saying what to fix. The rest of the code gets `RolloutSpec`, the
validated spec under flat names. Checks that need the cluster (broker ids exist, the canary
leaves a baseline) happen in preflight, still before any change.

Secrets (sasl.password, ssl.key.password, …) belong in `cluster.client` like any librdkafka setting, but need not
be written into the file: given `environ` (the CLI passes its environment), `KAFKA_CANARY_CLIENT_<KEY>` variables
add or override client settings, as for the probe (`KAFKA_CANARY_CLIENT_SASL_PASSWORD` → sasl.password). Secret
values never leave the process: `to_dict()` (run.json, the report) shows them masked.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal, TypeVar, get_args

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    Field,
    PlainValidator,
    ValidationError,
    ValidationInfo,
    WithJsonSchema,
    field_validator,
    model_validator,
)

from canary.cluster.node_config import is_managed
from canary.errors import CanaryError, one_line
from canary.fields import (
    BrokerId,
    ClientSettings,
    ConfigKey,
    ConfigValue,
    Duration,
    KafkaVersion,
    Matching,
    Name,
    RunId,
    SpecModel,
    TopicName,
    problems,
)
from canary.files import read_spec_file, shown_path
from canary.kafka.secrets import is_secret, redacted, refuse_credentials
from canary.rollout.deployer import CommandSettings, DockerSettings, open_deployer
from canary.rollout.deployer import Deployer as DeployerType
from canary.rollout.deployers.commands import placeholders, quoted_placeholders

Deployer = Literal["local", "docker", "command"]
Engine = Literal["spark", "inline"]
DEPLOYERS: tuple[str, ...] = get_args(Deployer)
ENGINES: tuple[str, ...] = get_args(Engine)
DAY = 24 * 3600


class SpecError(CanaryError):
    """A spec that cannot be used; `problems` lists every field to fix."""

    WHAT = "the rollout spec"

    def __init__(self, problems: list[str]):
        self.problems = problems
        # One problem is one line (the CLI's error line); several are listed one per line.
        listed = " " + problems[0] if len(problems) == 1 else "\n  - " + "\n  - ".join(problems)
        super().__init__(f"{self.WHAT} is not valid, nothing was changed:" + listed)


class SpecSection(SpecModel):
    """A section of a spec file: a null value (`probe:` with nothing under it) means the field's default."""

    @model_validator(mode="before")
    @classmethod
    def _null_is_default(cls, data: Any) -> Any:
        return {k: v for k, v in data.items() if v is not None} if isinstance(data, dict) else data


def section() -> Any:
    """The default of a section field: a section left out is validated from {} (its defaults, or the problem of a
    field it requires)."""
    return Field(default_factory=dict)


def interim_within(window: float, interim: float) -> None:
    """An interim look comes within the window it looks into."""
    if interim > window:
        raise ValueError(f"interim_interval {interim:g}s is longer than the window {window:g}s; shorten it or "
                         f"lengthen the window")


class DockerSection(SpecSection):
    """The docker deployer's cluster: containers labelled io.kafka-canary.cluster=<name> on a Docker engine."""

    name: Name
    image: str | None = None            # version -> image, e.g. apache/kafka:{version} (None: $KAFKA_CANARY_IMAGE)
    host: str | None = None             # the engine, as DOCKER_HOST says it (None: $DOCKER_HOST or the local socket)
    stop_timeout: Annotated[float, Duration(1, 3600)] = 120.0   # controlled shutdown before SIGKILL
    start_timeout: Annotated[float, Duration(5, 3600)] = 120.0  # until a new container serves its listener

    @field_validator("image")
    @classmethod
    def _template(cls, value: str | None) -> str | None:
        if value is not None and "{version}" not in value:
            raise ValueError("must contain {version}, e.g. apache/kafka:{version}")
        unknown = sorted(placeholders(value) - {"version"}) if value is not None else []
        if unknown:
            raise ValueError(f"uses {', '.join('{' + u + '}' for u in unknown)}; an image template may use only "
                             f"{{version}}, e.g. apache/kafka:{{version}}")
        return value

    @field_validator("host")
    @classmethod
    def _no_password(cls, value: str | None) -> str | None:
        if value is not None:  # an ssh://user@host login name is no secret: SSH keys authenticate
            refuse_credentials(value, "a tcp:// engine authenticates with TLS certificates (DOCKER_CERT_PATH, "
                                      "DOCKER_TLS_VERIFY), an ssh://user@host engine with SSH keys")
        return value

    def settings(self) -> DockerSettings:
        return DockerSettings(self.name, self.image, self.host, self.stop_timeout, self.start_timeout)


# The placeholders each command of the command deployer may use (canary.rollout.deployers.command).
_NODE = {"node_id", "broker_id", "role", "host"}
COMMAND_PLACEHOLDERS = {"roll": _NODE | {"version", "config_file", "config_json"}, "describe": _NODE,
                        "prepare": _NODE | {"version"}, "roll_controller": _NODE | {"version"}, "stop": _NODE,
                        "start": _NODE}
# Only what host names, addresses and ssh's user@host need: nothing a shell acts on, and no leading `-` that ssh or
# another command would take for an option (-oProxyCommand=...).
Host = Annotated[str, Matching(r"^(?!-)[A-Za-z0-9._:@\[\]%-]{1,253}$",
                               "a host name or address, as your commands take it: letters, digits and . _ - : @ [ ] %, "
                               "not starting with -")]


class CommandSection(SpecSection):
    """The command deployer's fleet: node ids and hosts, and the shell command templates that act on one node."""

    brokers: dict[int, Host] = Field(min_length=1)       # broker id -> host ({host} in its commands)
    roll: str                                          # stop, put {version} and {config_file} in place, start
    describe: str                                      # print the node's version [running|stopped], or JSON
    controllers: dict[int, Host] = Field(default_factory=dict)
    roll_controller: str | None = None                 # restart one controller on {version}
    prepare: str | None = None                         # make {version} ready on {host} before any change
    stop: str | None = None                            # stop one broker gracefully (stop-broker; with start)
    start: str | None = None                           # start it again as it was (start-broker)
    timeout: Annotated[float, Duration(1, DAY)] = 600.0            # per roll, prepare, controller roll
    describe_timeout: Annotated[float, Duration(1, 3600)] = 30.0   # per describe

    @field_validator("roll", "describe", "roll_controller", "prepare", "stop", "start")
    @classmethod
    def _placeholders(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is None:
            return value
        if not value.strip():
            raise ValueError("is empty; write the shell command")
        name = str(info.field_name)
        used = placeholders(value)
        unknown = sorted(used - COMMAND_PLACEHOLDERS[name])
        if unknown:
            raise ValueError(f"uses {', '.join('{' + u + '}' for u in unknown)}; a {name} command may use "
                             f"{', '.join('{' + k + '}' for k in sorted(COMMAND_PLACEHOLDERS[name]))}")
        quoted = quoted_placeholders(value)
        if quoted:
            raise ValueError(f"writes {', '.join('{' + q + '}' for q in quoted)} inside quotes; write placeholders "
                             f"bare: each value is quoted for the shell already, and quotes around it undo that")
        if name == "roll" and not ({"config_file", "config_json"} & used and "version" in used):
            raise ValueError("must use {version} and {config_file} or {config_json}: a roll puts the broker on "
                             "exactly that version and config")
        if name == "roll_controller" and "version" not in used:
            raise ValueError("must use {version}")
        return value

    @model_validator(mode="after")
    def _controllers_have_a_command(self) -> CommandSection:
        if self.controllers and not self.roll_controller:
            raise ValueError("controllers are listed but no roll_controller command rolls them; add one, or leave the "
                             "controllers out (an upgrade then leaves them as they are)")
        if (self.stop is None) != (self.start is None):
            raise ValueError("give stop and start together: a broker this deployer stops it must also start")
        both = sorted(set(self.controllers) & set(self.brokers))
        if both:
            raise ValueError(f"node ids {both} are listed as brokers and as controllers; a combined node is not "
                             f"supported")
        return self

    def settings(self) -> CommandSettings:
        return CommandSettings(**self.model_dump())


_SECTION_EXAMPLE = {"docker": "{name: <the io.kafka-canary.cluster label>}",
                    "command": "{brokers: {1: host-1, …}, roll: …, describe: …}"}


class ClusterSection(SpecSection):
    """The cluster a rollout acts on; also a kafka_canary Airflow connection's extras (its password is added to the
    client settings as sasl.password)."""

    deployer: Deployer = "local"
    dir: str = ""                        # local: the cluster's directory (as given to `kafka-canary cluster up`)
    docker: DockerSection | None = None  # docker: which containers
    command: CommandSection | None = None  # command: which nodes, and the commands that act on one
    # where clients connect (docker: default the containers' address labels; command: required)
    bootstrap_servers: str | None = None
    client: ClientSettings = Field(default_factory=dict)  # librdkafka settings (security) for every client

    @field_validator("dir")
    @classmethod
    def _local_has_a_directory(cls, value: str, info: ValidationInfo) -> str:
        if info.data.get("deployer", "local") == "local" and not value.strip():
            raise ValueError("is required: the local cluster's directory (as given to `kafka-canary cluster up`)")
        return value

    @field_validator("docker", "command")
    @classmethod
    def _deployer_has_its_section(cls, value: Any, info: ValidationInfo) -> Any:
        """The docker and command deployers each need the section of their name."""
        if info.data.get("deployer") == info.field_name and value is None:
            raise ValueError(f"is required with deployer {info.field_name}: {_SECTION_EXAMPLE[str(info.field_name)]}")
        return value

    @field_validator("bootstrap_servers")
    @classmethod
    def _command_has_bootstrap(cls, value: str | None, info: ValidationInfo) -> str | None:
        if info.data.get("deployer") == "command" and not (value or "").strip():
            raise ValueError("is required with deployer command (host:port of the brokers' client listener)")
        return value

    def open_deployer(self, client_config: dict[str, str] | None = None) -> DeployerType:
        """The deployer this section names."""
        return open_deployer(self.deployer, self.dir, self.docker.settings() if self.docker else None,
                             self.bootstrap_servers, client_config if client_config is not None else self.client,
                             self.command.settings() if self.command else None)


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


class CanarySection(SpecSection):
    count: int | None = Field(None, strict=True, ge=1)                    # exactly one of count / brokers
    brokers: list[BrokerId] | None = Field(None, min_length=1, json_schema_extra={"uniqueItems": True})

    @field_validator("brokers")
    @classmethod
    def _each_once(cls, brokers: list[int] | None) -> list[int] | None:
        twice = sorted({b for b in brokers or () if brokers and brokers.count(b) > 1})
        if twice:
            raise ValueError(f"broker ids {twice} are listed twice")
        return brokers

    @model_validator(mode="after")
    def _one_of(self) -> CanarySection:
        if (self.count is None) == (self.brokers is None):
            raise ValueError("give exactly one of canary.count (how many brokers) or canary.brokers (their ids)")
        return self


class ProbeSection(SpecSection):
    window: Annotated[float, Duration(10, DAY)] = 120.0            # seconds of probe traffic judged
    interim_interval: Annotated[float, Duration(5, DAY)] = 30.0    # seconds between interim looks (fail fast)
    rate: float = Field(20.0, strict=True, ge=0.1, le=10_000)      # messages/s per partition (data in 2 min)
    preflight: Annotated[float, Duration(2, 600)] = 10.0           # the baseline probe in preflight and after promote
    # Preflight's probe runs at least this long: each broker's latency before the change, which the window's latency
    # quantiles are calibrated by (canary/judge/README.md; p99 needs about 30 s at 20 msg/s per partition).
    calibration: Annotated[float, Duration(0, 600)] = 30.0

    @model_validator(mode="after")
    def _interim_within_window(self) -> ProbeSection:
        interim_within(self.window, self.interim_interval)
        return self


class JudgeSection(SpecSection):
    config: Any = None          # a judge.yaml path, an inline mapping, or None for the defaults
    engine: Engine = "spark"

    @field_validator("config")
    @classmethod
    def _judge_config(cls, value: Any) -> Any:
        from canary.judge import ConfigError

        if value is not None:
            try:
                judge_settings(value)
            except CanaryError as exc:  # the field's name says "judge config" already
                raise ValueError(str(exc).removeprefix(ConfigError.PREFIX)) from None
        return value


class FaultSection(SpecSection):
    """Deliberate faults the canary brokers get with the change (scenarios and tests)."""
    client_delay_ms: float = Field(0.0, strict=True, ge=0, le=60_000)  # a delaying proxy before each canary broker


class TimeoutsSection(SpecSection):
    warm_up: Annotated[float, Duration(10, DAY)] = 300.0   # a canary broker rejoining every ISR
    guard: Annotated[float, Duration(0, DAY)] = 300.0      # the safe-roll guard allowing a restart


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
    waits up to `wait` for a fair share before the window starts."""

    tolerance: float = Field(0.5, gt=0, lt=1)
    min_bytes_per_s: float = Field(100_000.0, ge=0, le=1e12)
    wait: Annotated[float, Duration(0, 3600)] = 60.0


# all: every topic, as a finished roll would lead them; a list: the probe's and these; none: the probe's alone.
LeadTopics = Literal["all", "none"] | list[TopicName]
# required: a PROMOTE whose window had no representative traffic through a fairly loaded canary is INCONCLUSIVE.
Capacity = Literal["required", "not_required"]


class BrokerRolloutModel(SpecSection):
    """The broker rollout spec file, as written."""
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
    run_id: RunId | None = None


class SpecIdentity:
    """Mixed into a rollout spec (a dataclass or a model) with `client` and `run_id` fields: its run id, its JSON
    form without secrets, and the secret values no file of the run may contain."""

    RUN_ID_PREFIX: ClassVar[str] = "rollout"
    if TYPE_CHECKING:  # the fields and the dataclass-ness the mixing class brings
        __dataclass_fields__: ClassVar[dict[str, Any]]
        run_id: str | None
        client: dict[str, str]

    @property
    def effective_run_id(self) -> str:
        """The given run id, else one derived from the spec (a retried rollout finds its own run)."""
        if self.run_id:
            return self.run_id
        digest = hashlib.sha256(json.dumps(self.to_dict(), sort_keys=True).encode()).hexdigest()[:10]
        return f"{self.RUN_ID_PREFIX}-{digest}"

    def to_dict(self) -> dict:
        """The spec as run.json keeps it (a resumed run compares it): sections as mappings, secrets masked."""
        data = (self.model_dump() if isinstance(self, BaseModel)
                else {f.name: getattr(self, f.name) for f in fields(self)})
        data = {k: v.model_dump() if isinstance(v, BaseModel) else v for k, v in data.items()}
        if isinstance(data.get("cluster"), dict):  # its client settings are `client`'s, masked below
            data["cluster"] = {k: v for k, v in data["cluster"].items() if k != "client" and v is not None}
        return {**data, "client": redacted(self.client)}

    @property
    def secret_values(self) -> list[str]:
        """The values of the secret client settings: what no file of the run may contain."""
        return [v for k, v in self.client.items() if is_secret(k) and v]


@dataclass(frozen=True)
class RolloutSpec(SpecIdentity):
    """A validated broker rollout spec under the names the steps use (built by load_spec only)."""
    cluster_dir: str
    cluster: ClusterSection
    change: ChangeSection
    canary_count: int | None
    canary_brokers: tuple[int, ...]
    deployer: str
    client: dict[str, str]
    window: float
    interim_interval: float
    probe_rate: float
    preflight_probe: float
    calibration_probe: float
    judge_config: str | dict | None
    engine: str
    finalize: bool
    lead_topics: tuple[str, ...] | Literal["all", "none"]
    capacity: str
    traffic: TrafficSection
    fault: FaultSection
    warm_up_timeout: float
    guard_timeout: float
    broker_metrics: BrokerMetricsSection
    load: LoadSection
    run_id: str | None


def judge_settings(source: str | dict | None):
    """The JudgeConfig of a spec: defaults, a judge.yaml path, or an inline mapping."""
    from canary.judge import ConfigError, load_config
    from canary.judge.config import config_from_dict

    if isinstance(source, dict):
        return config_from_dict(source)
    if source is None or isinstance(source, str):
        return load_config(source)
    raise ConfigError(f"must be a judge.yaml path or a mapping, got {type(source).__name__}")


Model = TypeVar("Model", bound=BaseModel)


def validated(model: type[Model], source: object, error: type[SpecError] = SpecError) -> Model:
    """`model` from a YAML/JSON file (path) or a mapping; raises `error` naming every problem at once."""
    raw = source
    if isinstance(source, str | Path):
        path = Path(source)
        try:  # within a size limit, no aliases, no duplicate keys (canary.files)
            raw = read_spec_file(path)
        except (OSError, ValueError) as exc:  # ValueError: too large, no regular file, a NUL byte in the path
            raise error([f"cannot read the spec file {shown_path(path)}: "
                         f"{getattr(exc, 'strerror', None) or one_line(exc)}"]) from exc
        except yaml.YAMLError as exc:
            raise error([f"{shown_path(path)} is not valid YAML/JSON: {one_line(exc)}"]) from exc
    if not isinstance(raw, Mapping):
        raise error([f"the spec must be a mapping with {', '.join(model.model_fields)} at the top level"])
    try:  # keys as text: a model with its own __init__ takes them as keywords (and no field is named by a number)
        return model.model_validate({str(k): v for k, v in raw.items()})
    except ValidationError as exc:
        raise error(problems(exc, model)) from None


def with_environment(client: dict[str, str], environ: Mapping[str, str] | None) -> dict[str, str]:
    """Client settings with the KAFKA_CANARY_CLIENT_<KEY> variables of `environ` added or overriding."""
    from canary.kafka.settings import client_settings_from_env

    return client if environ is None else {**client, **client_settings_from_env(dict(environ))}


def load_spec(source: str | Path | dict, environ: Mapping[str, str] | None = None) -> RolloutSpec:
    """A spec from a YAML/JSON file or a mapping; raises SpecError naming every bad field. With `environ`, its
    KAFKA_CANARY_CLIENT_<KEY> variables add or override the cluster's client settings."""
    spec = validated(BrokerRolloutModel, source)
    return RolloutSpec(
        cluster_dir=spec.cluster.dir, cluster=spec.cluster, change=spec.change, canary_count=spec.canary.count,
        canary_brokers=tuple(spec.canary.brokers or ()), deployer=spec.cluster.deployer,
        client=with_environment(spec.cluster.client, environ), window=spec.probe.window,
        interim_interval=spec.probe.interim_interval, probe_rate=spec.probe.rate,
        preflight_probe=spec.probe.preflight, calibration_probe=spec.probe.calibration,
        judge_config=spec.judge.config, engine=spec.judge.engine,
        finalize=spec.finalize,
        lead_topics=spec.lead_topics if isinstance(spec.lead_topics, str) else tuple(spec.lead_topics),
        capacity=spec.capacity, traffic=spec.traffic, fault=spec.fault,
        warm_up_timeout=spec.timeouts.warm_up, guard_timeout=spec.timeouts.guard, broker_metrics=spec.broker_metrics,
        load=spec.load, run_id=spec.run_id)
