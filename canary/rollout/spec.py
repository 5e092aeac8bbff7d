"""The rollout spec: which cluster, what change, which canary brokers, how long to watch, how to judge.

    cluster:  {deployer: local, dir: /tmp/kc}          # the embedded local cluster
    change:   {version: 4.1.2, config: {num.io.threads: "6", log.cleaner.threads: null}}
    canary:   {count: 1}                                # or {brokers: [2]}
    probe:    {window: 2m, interim_interval: 30s, rate: 10}
    judge:    {config: judge.yaml, engine: spark}       # engine: spark (the Spark job) or inline
    finalize: true
    lead_topics: [orders]                               # user topics whose canary partitions get canary leaders
    fault:    {client_delay_ms: 200}                    # scenarios and tests only: make the canary bad

`load_spec` reads YAML or JSON and checks every field before anything is touched; all problems are
reported at once, each saying what to fix. Checks that need the cluster (broker ids exist, the canary
leaves a baseline) happen in preflight, still before any change.

Secrets (sasl.password, ssl.key.password, …) belong in `cluster.client` like any librdkafka setting, but need not
be written into the file: given `environ` (the CLI passes its environment), `KAFKA_CANARY_CLIENT_<KEY>` variables
add or override client settings, as for the probe (`KAFKA_CANARY_CLIENT_SASL_PASSWORD` → sasl.password). Secret
values never leave the process: `to_dict()` (run.json, the report) shows them masked.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import yaml

from canary.cluster.distribution import parse_version
from canary.cluster.node_config import MANAGED_KEYS
from canary.errors import CanaryError, SetupError, one_line
from canary.kafka import broker_config
from canary.kafka.secrets import is_secret, redacted
from canary.probe.config import parse_duration

RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
_TOPIC = re.compile(r"^[A-Za-z0-9._-]{1,249}$")
DEPLOYERS = ("local",)
ENGINES = ("spark", "inline")


class SpecError(CanaryError):
    """A rollout spec that cannot be used; `problems` lists every field to fix."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        # One problem is one line (the CLI's error line); several are listed one per line.
        listed = " " + problems[0] if len(problems) == 1 else "\n  - " + "\n  - ".join(problems)
        super().__init__("the rollout spec is not valid, nothing was changed:" + listed)


@dataclass(frozen=True)
class ChangeSpec:
    version: str | None = None                  # target Kafka version; None keeps each broker's version
    config: dict[str, str | None] = field(default_factory=dict)  # broker overrides; None removes one


@dataclass(frozen=True)
class FaultSpec:
    """Deliberate faults the canary brokers get with the change (scenarios and tests)."""
    client_delay_ms: float = 0.0                # a delaying TCP proxy in front of each canary broker


class SpecIdentity:
    """Mixed into a rollout spec dataclass with `client` and `run_id` fields: its run id, its JSON form without
    secrets, and the secret values no file of the run may contain."""

    RUN_ID_PREFIX = "rollout"
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
        data = asdict(self)
        data["client"] = redacted(self.client)
        return data

    @property
    def secret_values(self) -> list[str]:
        """The values of the secret client settings: what no file of the run may contain."""
        return [v for k, v in self.client.items() if is_secret(k) and v]


@dataclass(frozen=True)
class RolloutSpec(SpecIdentity):
    cluster_dir: str
    change: ChangeSpec
    canary_count: int | None = None             # exactly one of count / brokers
    canary_brokers: tuple[int, ...] = ()
    deployer: str = "local"
    client: dict[str, str] = field(default_factory=dict)   # librdkafka settings (security) for every client
    window: float = 120.0                       # seconds of probe traffic judged
    interim_interval: float = 30.0              # seconds between interim looks (fail fast)
    probe_rate: float = 20.0                    # messages per second per partition (enough data in 2 min)
    preflight_probe: float = 10.0               # seconds of the baseline probe in preflight (and after promote)
    judge_config: str | dict | None = None      # a judge.yaml path, an inline mapping, or None for defaults
    engine: str = "spark"
    finalize: bool = True
    lead_topics: tuple[str, ...] = ()
    fault: FaultSpec = field(default_factory=FaultSpec)
    warm_up_timeout: float = 300.0              # seconds a canary broker may take to rejoin every ISR
    guard_timeout: float = 300.0                # seconds to wait for the safe-roll guard to allow a restart
    run_id: str | None = None


def judge_settings(source: str | dict | None):
    """The JudgeConfig of a spec: defaults, a judge.yaml path, or an inline mapping."""
    from canary.judge import ConfigError, load_config
    from canary.judge.config import config_from_dict

    if isinstance(source, dict):
        return config_from_dict(source)
    if source is None or isinstance(source, str):
        return load_config(source)
    raise ConfigError(f"must be a judge.yaml path or a mapping, got {type(source).__name__}")


def load_spec(source: str | Path | dict, environ: Mapping[str, str] | None = None) -> RolloutSpec:
    """A spec from a YAML/JSON file or a mapping; raises SpecError naming every bad field. With `environ`, its
    KAFKA_CANARY_CLIENT_<KEY> variables add or override the cluster's client settings."""
    if isinstance(source, dict):
        raw = source
    elif not isinstance(source, str | Path):
        raw = source  # refused below: not a mapping
    else:
        path = Path(source)
        try:
            raw = yaml.safe_load(path.read_text())
        except OSError as exc:
            raise SpecError([f"cannot read the spec file {path}: {exc.strerror}"]) from exc
        except yaml.YAMLError as exc:
            raise SpecError([f"{path} is not valid YAML/JSON: {one_line(exc)}"]) from exc
    if not isinstance(raw, dict):
        raise SpecError(["the spec must be a mapping with cluster, change, canary, … at the top level"])
    from canary.kafka.settings import client_settings_from_env

    return _Parser(raw, client_settings_from_env(environ) if environ is not None else {}).parse()


class _Parser:
    def __init__(self, raw: dict, env_client: dict[str, str] | None = None):
        self.raw = raw
        self.env_client = env_client or {}
        self.problems: list[str] = []

    def bad(self, text: str) -> None:
        self.problems.append(text)

    def section(self, name: str) -> dict:
        value = self.raw.get(name) or {}
        if not isinstance(value, dict):
            self.bad(f"{name}: must be a mapping, got {type(value).__name__}")
            return {}
        return value

    def unknown(self, where: str, given: dict, known: set[str]) -> None:
        for key in sorted(set(given) - known):
            self.bad(f"{where}{key}: unknown field; known fields are {', '.join(sorted(known))}")

    def seconds(self, where: str, value, default: float, low: float, high: float) -> float:
        if value is None:
            return default
        try:
            seconds = parse_duration(value)
        except CanaryError:
            seconds = None
        if seconds is None or not low <= seconds <= high:
            self.bad(f"{where}: {value!r} must be a duration between {low:g}s and {high:g}s, such as 30s or 2m")
            return default
        return seconds

    def number(self, where: str, value, default: float, low: float, high: float) -> float:
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
            self.bad(f"{where}: {value!r} must be a number between {low:g} and {high:g}")
            return default
        return float(value)

    def parse(self) -> RolloutSpec:
        raw = self.raw
        self.unknown("", raw, {"cluster", "change", "canary", "probe", "judge", "finalize", "lead_topics", "fault",
                               "timeouts", "run_id"})
        cluster = self.section("cluster")
        self.unknown("cluster.", cluster, {"deployer", "dir", "client"})
        deployer = cluster.get("deployer", "local")
        if deployer not in DEPLOYERS:
            self.bad(f"cluster.deployer: {deployer!r} is not known; use one of {', '.join(DEPLOYERS)}")
        cluster_dir = cluster.get("dir")
        if not isinstance(cluster_dir, str) or not cluster_dir.strip():
            self.bad("cluster.dir: the local cluster's directory is required (as given to `kafka-canary cluster up`)")
            cluster_dir = ""
        client = cluster.get("client") or {}
        if not isinstance(client, dict) or not all(isinstance(k, str) for k in client):
            self.bad("cluster.client: must be a mapping of librdkafka settings, e.g. {security.protocol: SASL_SSL}")
            client = {}
        client = {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in client.items()} | self.env_client

        change = self.section("change")
        self.unknown("change.", change, {"version", "config"})
        version = change.get("version")
        if version is not None:
            try:
                version = ".".join(map(str, parse_version(str(version))))
            except SetupError as exc:
                self.bad(f"change.version: {exc}")
                version = None
        config = change.get("config") or {}
        if not isinstance(config, dict):
            self.bad("change.config: must be a mapping of broker config overrides (a null value removes one)")
            config = {}
        for key, value in config.items():
            if problem := broker_config.key_problem(key):
                self.bad(f"change.config: {problem}")
            elif isinstance(value, dict | list):
                self.bad(f"change.config.{key}: must be a single value or null, got {type(value).__name__}")
            elif problem := broker_config.value_problem(value):
                self.bad(f"change.config.{key}: {problem}")
            elif key in MANAGED_KEYS or key.startswith("listener.name."):
                self.bad(f"change.config.{key}: managed by the deployer (the canary marker travels in broker.rack; "
                         f"listeners, ids and storage are the cluster's own) and cannot be changed by a rollout")
        config = {str(k): (None if v is None else str(v).lower() if isinstance(v, bool) else str(v))
                  for k, v in config.items()}
        if "version" not in change and not config:
            self.bad("change: say what changes: a target version (change.version) and/or broker config "
                     "overrides (change.config)")

        canary = self.section("canary")
        self.unknown("canary.", canary, {"count", "brokers"})
        count, brokers = canary.get("count"), canary.get("brokers")
        if (count is None) == (brokers is None):
            self.bad("canary: give exactly one of canary.count (how many brokers) or canary.brokers (their ids)")
        if count is not None and (isinstance(count, bool) or not isinstance(count, int) or count < 1):
            self.bad(f"canary.count: {count!r} must be a whole number ≥ 1")
            count = None
        ids: tuple[int, ...] = ()
        if brokers is not None:
            if (not isinstance(brokers, list) or not brokers
                    or not all(isinstance(b, int) and not isinstance(b, bool) and b >= 0 for b in brokers)):
                self.bad(f"canary.brokers: {brokers!r} must be a non-empty list of broker ids")
            elif len(set(brokers)) != len(brokers):
                dupes = sorted({b for b in brokers if brokers.count(b) > 1})
                self.bad(f"canary.brokers: broker ids {dupes} are listed twice")
            else:
                ids = tuple(brokers)

        probe = self.section("probe")
        self.unknown("probe.", probe, {"window", "interim_interval", "rate", "preflight"})
        window = self.seconds("probe.window", probe.get("window"), 120.0, 10, 24 * 3600)
        interim = self.seconds("probe.interim_interval", probe.get("interim_interval"), 30.0, 5, 24 * 3600)
        if interim > window:
            self.bad(f"probe.interim_interval: {interim:g}s is longer than the window {window:g}s")
        rate = self.number("probe.rate", probe.get("rate"), 20.0, 0.1, 10_000)
        preflight = self.seconds("probe.preflight", probe.get("preflight"), 10.0, 2, 600)

        judge = self.section("judge")
        self.unknown("judge.", judge, {"config", "engine"})
        judge_config = judge.get("config")
        if judge_config is not None:
            try:
                judge_settings(judge_config)
            except CanaryError as exc:
                self.bad(f"judge.config: {exc}")
        engine = judge.get("engine", "spark")
        if engine not in ENGINES:
            self.bad(f"judge.engine: {engine!r} must be one of {', '.join(ENGINES)}")

        finalize = raw.get("finalize", True)
        if not isinstance(finalize, bool):
            self.bad(f"finalize: {finalize!r} must be true or false")
            finalize = True
        topics = raw.get("lead_topics") or []
        if not isinstance(topics, list) or not all(isinstance(t, str) and _TOPIC.match(t) for t in topics):
            self.bad(f"lead_topics: {topics!r} must be a list of topic names")
            topics = []

        fault = self.section("fault")
        self.unknown("fault.", fault, {"client_delay_ms"})
        delay = self.number("fault.client_delay_ms", fault.get("client_delay_ms"), 0.0, 0, 60_000)

        timeouts = self.section("timeouts")
        self.unknown("timeouts.", timeouts, {"warm_up", "guard"})
        warm_up = self.seconds("timeouts.warm_up", timeouts.get("warm_up"), 300.0, 10, 24 * 3600)
        guard = self.seconds("timeouts.guard", timeouts.get("guard"), 300.0, 0, 24 * 3600)

        run_id = raw.get("run_id")
        if run_id is not None and (not isinstance(run_id, str) or not RUN_ID.match(run_id)):
            self.bad(f"run_id: {run_id!r} must be 1-100 letters, digits, '.', '_' or '-'")
            run_id = None

        if self.problems:
            raise SpecError(self.problems)
        return RolloutSpec(
            cluster_dir=cluster_dir, change=ChangeSpec(version, config), canary_count=count, canary_brokers=ids,
            deployer=deployer, client=client, window=window, interim_interval=interim, probe_rate=rate,
            preflight_probe=preflight, judge_config=judge_config, engine=engine, finalize=finalize,
            lead_topics=tuple(topics), fault=FaultSpec(client_delay_ms=delay), warm_up_timeout=warm_up,
            guard_timeout=guard, run_id=run_id)
