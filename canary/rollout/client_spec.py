"""The client rollout spec: which cluster, which service (topic, group, its fleet of instances), which version change,
how many canary partitions, how long to watch, how to judge.

    cluster: {deployer: local, dir: /tmp/kc}
    service:
      name: orders                  # instance names start with it (orders-producer-0, orders-consumer-1, …)
      topic: orders
      group: orders-billing         # the consumers' group id (offset storage; lane consumers assign themselves)
      dir: /tmp/orders-fleet        # the service deployer's directory: instance state, logs, processed-record logs
      producers: 1                  # baseline producer instances (0: none)
      consumers: 2                  # baseline consumer instances (0: none)
      rate: 20                      # records per second per producer instance
      observation_id: orders-svc    # run id the fleet's observations carry (default <name>-service)
    change:  {from: v1, to: v2}     # every instance goes from `from` to `to`
    lane:    {partitions: 2}        # canary partitions opened for the rollout
    window:  {duration: 30s, interim_interval: 10s}
    judge:   {config: judge.yaml, engine: inline}   # engine: spark (the Spark job) or inline
    timeouts: {stop: 20s, drain: 60s, lane: 60s}
    run_id: client-42

`load_client_spec` checks every field before anything is touched and lists every problem at once (SpecError, as
for the broker rollout). Checks that need the cluster (the topic exists, a canary broker hosts its replicas) are
preflight's, still before any change. `KAFKA_CANARY_CLIENT_<KEY>` variables add or override client settings.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from canary.errors import one_line
from canary.rollout.spec import (
    _TOPIC,
    DEPLOYERS,
    ENGINES,
    RUN_ID,
    SpecError,
    SpecIdentity,
    _Parser,
    judge_settings,
)

_VERSION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")

# The judge's defaults are tuned for 5-minute probe windows of the broker rollout. A client rollout compares two
# small fleets of service instances for a short window: the client metrics must have data and decide, and the
# metrics that compare lanes of different sizes (throughput) or the probe's own bookkeeping (loss, duplicates,
# order) are left out; e2e and produce latency keep wide floors (the lanes run on different brokers and processes).
CLIENT_JUDGE: dict = {
    "warmup_s": 5.0, "bucket_s": 5.0, "min_buckets": 3,
    "metrics": {
        "e2e_latency_p50": {"enabled": False},
        "e2e_latency_p95": {"enabled": False},
        # No absolute guard and no fail fast on e2e: on a starved host both lanes' consumers stall for seconds
        # (measured: p99 7 s canary, 16 s baseline at load 15 on 2 cores), which says nothing about the version.
        "e2e_latency_p99": {"min_samples": 100, "rel_floor": 1.0, "abs_floor": 500.0, "slo": None,
                            "critical": False},
        "produce_latency_p99": {"min_samples": 100, "rel_floor": 0.5, "abs_floor": 50.0},
        "produce_error_rate": {"min_samples": 200},
        "consume_error_rate": {"min_samples": 200},
        "availability": {"min_samples": 200},
        "loss_rate": {"enabled": False},
        "duplicate_rate": {"enabled": False},
        "out_of_order_rate": {"enabled": False},
        "throughput": {"enabled": False},
        "processing_latency_p99": {"min_samples": 100, "rel_floor": 0.5, "abs_floor": 10.0, "must_have_data": True},
        "processing_error_rate": {"min_samples": 200, "must_have_data": True, "critical": True, "weight": 2.0},
        "lag_p99": {"min_samples": 100},
    },
}


@dataclass(frozen=True)
class ServiceSpec:
    name: str
    topic: str
    group: str
    dir: str
    producers: int = 1
    consumers: int = 1
    rate: float = 20.0
    observation_id: str = ""

    @property
    def observations_run_id(self) -> str:
        """The run id every instance's observations carry: the fleet's, since baseline instances run before and
        after any one rollout; a rollout tells its window apart by time (one rollout per cluster: the lock)."""
        return self.observation_id or f"{self.name}-service"


@dataclass(frozen=True)
class ClientRolloutSpec(SpecIdentity):
    RUN_ID_PREFIX = "client-rollout"

    cluster_dir: str
    service: ServiceSpec
    from_version: str
    to_version: str
    canary_partitions: int = 1
    deployer: str = "local"
    client: dict[str, str] = field(default_factory=dict)
    window: float = 60.0
    interim_interval: float = 15.0
    judge_config: str | dict | None = None      # None: CLIENT_JUDGE
    engine: str = "spark"
    stop_timeout: float = 20.0                  # SIGTERM → SIGKILL
    drain_timeout: float = 60.0                 # rollback: canary consumers finish the canary partitions
    lane_timeout: float = 60.0                  # opening/closing the lane: reassignment and elections
    run_id: str | None = None

    def judge(self):
        """The JudgeConfig of this rollout: the spec's, else CLIENT_JUDGE."""
        return judge_settings(self.judge_config if self.judge_config is not None else CLIENT_JUDGE)


def load_client_spec(source: str | Path | dict, environ: Mapping[str, str] | None = None) -> ClientRolloutSpec:
    """A spec from a YAML/JSON file or a mapping; raises SpecError naming every bad field."""
    if isinstance(source, dict) or not isinstance(source, str | Path):
        raw = source  # a mapping, or refused below
    else:
        path = Path(source)
        try:
            raw = yaml.safe_load(path.read_text())
        except OSError as exc:
            raise SpecError([f"cannot read the spec file {path}: {exc.strerror}"]) from exc
        except yaml.YAMLError as exc:
            raise SpecError([f"{path} is not valid YAML/JSON: {one_line(exc)}"]) from exc
    if not isinstance(raw, dict):
        raise SpecError(["the spec must be a mapping with cluster, service, change, lane, … at the top level"])
    from canary.kafka.settings import client_settings_from_env

    return _ClientParser(raw, client_settings_from_env(environ) if environ is not None else {}).parse_client()


class _ClientParser(_Parser):
    def count(self, where: str, value, default: int, low: int, high: int) -> int:
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            self.bad(f"{where}: {value!r} must be a whole number between {low} and {high}")
            return default
        return value

    def name(self, where: str, value, pattern: re.Pattern, example: str, required: bool = True) -> str:
        if value is None and not required:
            return ""
        if not isinstance(value, str) or not pattern.match(value):
            self.bad(f"{where}: {value!r} must be a name such as {example}" if value is not None
                     else f"{where}: required, e.g. {example}")
            return ""
        return value

    def parse_client(self) -> ClientRolloutSpec:
        raw = self.raw
        self.unknown("", raw, {"cluster", "service", "change", "lane", "window", "judge", "timeouts", "run_id"})
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

        svc = self.section("service")
        self.unknown("service.", svc, {"name", "topic", "group", "dir", "producers", "consumers", "rate",
                                       "observation_id"})
        name = self.name("service.name", svc.get("name"), _NAME, "orders")
        topic = self.name("service.topic", svc.get("topic"), _TOPIC, "orders")
        group = self.name("service.group", svc.get("group"), _NAME, "orders-billing")
        fleet_dir = svc.get("dir")
        if not isinstance(fleet_dir, str) or not fleet_dir.strip():
            self.bad("service.dir: the service deployer's directory is required (instance state and logs)")
            fleet_dir = ""
        producers = self.count("service.producers", svc.get("producers"), 1, 0, 64)
        consumers = self.count("service.consumers", svc.get("consumers"), 1, 0, 64)
        if producers + consumers == 0:
            self.bad("service: producers and consumers are both 0; a rollout needs at least one instance")
        rate = self.number("service.rate", svc.get("rate"), 20.0, 0.1, 10_000)
        observation_id = self.name("service.observation_id", svc.get("observation_id"), RUN_ID, "orders-service",
                                   required=False)

        change = self.section("change")
        self.unknown("change.", change, {"from", "to"})
        versions = [self.name(f"change.{k}", change.get(k), _VERSION, example)
                    for k, example in (("from", "v1"), ("to", "v2"))]
        if all(versions) and versions[0] == versions[1]:
            self.bad(f"change: from and to are both {versions[0]!r}; nothing would change")

        lane = self.section("lane")
        self.unknown("lane.", lane, {"partitions"})
        partitions = self.count("lane.partitions", lane.get("partitions"), 1, 1, 10_000)

        window = self.section("window")
        self.unknown("window.", window, {"duration", "interim_interval"})
        duration = self.seconds("window.duration", window.get("duration"), 60.0, 10, 24 * 3600)
        interim = self.seconds("window.interim_interval", window.get("interim_interval"), 15.0, 5, 24 * 3600)
        if interim > duration:
            self.bad(f"window.interim_interval: {interim:g}s is longer than the window {duration:g}s")

        judge = self.section("judge")
        self.unknown("judge.", judge, {"config", "engine"})
        judge_config = judge.get("config")
        if judge_config is not None:
            from canary.errors import CanaryError
            try:
                judge_settings(judge_config)
            except CanaryError as exc:
                self.bad(f"judge.config: {exc}")
        engine = judge.get("engine", "spark")
        if engine not in ENGINES:
            self.bad(f"judge.engine: {engine!r} must be one of {', '.join(ENGINES)}")

        timeouts = self.section("timeouts")
        self.unknown("timeouts.", timeouts, {"stop", "drain", "lane"})
        stop = self.seconds("timeouts.stop", timeouts.get("stop"), 20.0, 1, 3600)
        drain = self.seconds("timeouts.drain", timeouts.get("drain"), 60.0, 0, 24 * 3600)
        lane_timeout = self.seconds("timeouts.lane", timeouts.get("lane"), 60.0, 5, 3600)

        run_id = raw.get("run_id")
        if run_id is not None and (not isinstance(run_id, str) or not RUN_ID.match(run_id)):
            self.bad(f"run_id: {run_id!r} must be 1-100 letters, digits, '.', '_' or '-'")
            run_id = None

        if self.problems:
            raise SpecError(self.problems)
        return ClientRolloutSpec(
            cluster_dir=cluster_dir, deployer=deployer, client=client,
            service=ServiceSpec(name=name, topic=topic, group=group, dir=fleet_dir, producers=producers,
                                consumers=consumers, rate=rate, observation_id=observation_id),
            from_version=versions[0], to_version=versions[1], canary_partitions=partitions, window=duration,
            interim_interval=interim, judge_config=judge_config, engine=engine, stop_timeout=stop,
            drain_timeout=drain, lane_timeout=lane_timeout, run_id=run_id)
