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
      command:                      # your service, any language (default: the sample services); {placeholders}
        consumer: [java, -jar, "billing-{version}.jar"]   # and every instance's environment: docs/clients.md
        producer: [./orders-feed, --rate, "{rate}"]
      env: {JAVA_OPTS: -Xmx256m}    # added to every instance's environment
      cwd: /srv/billing             # the instances' working directory (default: the fleet's dir)
    change:  {from: v1, to: v2}     # every instance goes from `from` to `to`
    lane:    {partitions: 2}        # canary partitions opened for the rollout
    window:  {duration: 30s, interim_interval: 10s}
    judge:   {config: judge.yaml, engine: inline}   # engine: spark (the Spark job) or inline
    timeouts: {stop: 20s, drain: 60s, lane: 60s}
    run_id: client-42

`load_client_spec` checks every field before anything is touched, through `ClientRolloutSpec` (every rule in one
place; the steps read it as it is), and lists every problem at once (SpecError, as for the broker rollout). Checks
that need the cluster (the topic exists, a canary broker hosts its replicas) are preflight's, still before any change.
`KAFKA_CANARY_CLIENT_<KEY>` variables add or override client settings.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from canary.clients.deployer import check_command
from canary.fields import NAME_PATTERN, Duration, Matching, Name, RunId, TopicName, required
from canary.kafka.secrets import redacted
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

if TYPE_CHECKING:
    from canary.judge import JudgeConfig
VersionLabel = Annotated[str, Matching(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$",
                                       "a version label such as v2 or 1.4.0 (1-64 letters, digits, '.', '_' or '-')")]

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
        # Critical: a version slower per record is slower for every record its canary takes, and the test is
        # anytime-valid; the warm-up (window.warmup) keeps a cold start out of it.
        "processing_latency_p99": {"min_samples": 100, "rel_floor": 0.5, "abs_floor": 10.0, "must_have_data": True,
                                   "critical": True},
        "processing_error_rate": {"min_samples": 200, "must_have_data": True, "critical": True, "weight": 2.0},
        "dropped_rate": {"min_samples": 200},
        "lag_p99": {"min_samples": 100},
    },
}


# What each shape of service must show data for: its writes when it has producer instances, what it read and
# processed when it has consumer instances. A consumer-only service writes nothing, a producer-only one reads
# nothing: requiring both would leave either INCONCLUSIVE however healthy. Measured what is there is still judged.
PRODUCED_METRICS = ("produce_latency_p99", "produce_error_rate")
CONSUMED_METRICS = ("e2e_latency_p99", "processing_latency_p99", "processing_error_rate")


def client_judge(producers: int, consumers: int) -> dict:
    """CLIENT_JUDGE for a service of `producers` producer and `consumers` consumer instances."""
    metrics = {name: dict(fields) for name, fields in CLIENT_JUDGE["metrics"].items()}
    for names, present in ((PRODUCED_METRICS, producers > 0), (CONSUMED_METRICS, consumers > 0)):
        for name in names:
            metrics[name] = metrics.get(name, {}) | {"must_have_data": present}
    return CLIENT_JUDGE | {"metrics": metrics}


class ServiceSpec(SpecSection):
    """The service whose instances the rollout changes."""
    name: Name                  # instance names start with it
    topic: TopicName
    group: Name                 # the consumers' group id
    dir: Annotated[str, required("the service deployer's directory (instance state and logs)")] = ""
    producers: int = Field(1, strict=True, ge=0, le=64)
    consumers: int = Field(1, strict=True, ge=0, le=64)
    rate: float = Field(20.0, strict=True, ge=0.1, le=10_000)  # records per second per producer instance
    observation_id: Annotated[str, Matching(f"^$|{NAME_PATTERN}", "a run id such as orders-service, or empty "
                                            "for <name>-service")] = ""
    # The team's own service: an argument list per role, {placeholders} from canary.clients.deployer.CONTRACT.
    command: dict[Literal["producer", "consumer"], list[Annotated[str, Field(strict=True, min_length=1)]]] = \
        Field(default_factory=dict)
    env: dict[Annotated[str, Matching(r"^[A-Za-z_][A-Za-z0-9_]*$", "an environment variable name such as "
                                      "JAVA_OPTS")], Annotated[str, Field(strict=True)]] = Field(default_factory=dict)
    cwd: str = ""

    @field_validator("command")
    @classmethod
    def _known_placeholders(cls, command: dict[str, list[str]]) -> dict[str, list[str]]:
        for role, argv in command.items():
            check_command(role, argv)
        return command

    @field_validator("consumers")
    @classmethod
    def _has_instances(cls, consumers: int, info: ValidationInfo) -> int:
        # a field validator, not a model one: it is reported even when another service field is wrong
        if consumers + info.data.get("producers", 1) == 0:
            raise ValueError("producers and consumers are both 0; a rollout needs at least one instance")
        return consumers

    @model_validator(mode="after")
    def _a_command_for_every_role(self) -> ServiceSpec:
        """A service of the team's own is all of its own: a role without a command would run the sample service
        in the team's topic and group."""
        if self.command:
            for role, count in (("producer", self.producers), ("consumer", self.consumers)):
                if count and role not in self.command:
                    raise ValueError(f"command has no {role} command but the service has {count} {role}(s); give "
                                     f"one, or set {role}s: 0")
        return self

    def stored(self) -> dict[str, Any]:
        """As run.json keeps it: the fields of its schema 1, then the team's command, environment (secrets
        masked) and directory only when given, so a run.json written before they existed still matches."""
        data = self.model_dump(exclude={"command", "env", "cwd"})
        return data | ({"command": self.command} if self.command else {}) | (
            {"env": redacted(self.env)} if self.env else {}) | ({"cwd": self.cwd} if self.cwd else {})

    @property
    def observations_run_id(self) -> str:
        """The run id every instance's observations carry: the fleet's, since baseline instances run before and
        after any one rollout; a rollout tells its window apart by time (one rollout per cluster: the lock)."""
        return self.observation_id or f"{self.name}-service"


class VersionChange(SpecSection):
    from_: VersionLabel = Field(alias="from")
    to: VersionLabel

    @model_validator(mode="after")
    def _changes(self) -> VersionChange:
        if self.from_ == self.to:
            raise ValueError(f"from and to are both {self.to!r}; nothing would change")
        return self


class LaneSection(SpecSection):
    partitions: int = Field(1, strict=True, ge=1, le=10_000)  # canary partitions opened for the rollout


class WindowSection(SpecSection):
    duration: Annotated[float, Duration(10, DAY)] = 60.0
    interim_interval: Annotated[float, Duration(5, DAY)] = 15.0
    # Seconds from the window's start not judged; None: the judge's (CLIENT_JUDGE: 5 s). A JVM canary starts cold
    # (class loading, the JIT, its first rebalance) against a warm baseline: 30 s (docs/clients.md).
    warmup: Annotated[float, Duration(0, DAY)] | None = None

    @model_validator(mode="after")
    def _interim_within_window(self) -> WindowSection:
        interim_within(self.duration, self.interim_interval)
        if self.warmup is not None and self.warmup >= self.duration:
            raise ValueError(f"warmup {self.warmup:g}s leaves nothing of the {self.duration:g}s window to judge; "
                             f"make it shorter than the window")
        return self


class ClientTimeouts(SpecSection):
    stop: Annotated[float, Duration(1, 3600)] = 20.0      # SIGTERM -> SIGKILL
    drain: Annotated[float, Duration(0, DAY)] = 60.0      # rollback: canary consumers finish the canary partitions
    lane: Annotated[float, Duration(5, 3600)] = 60.0      # opening/closing the lane: reassignment and elections


class ClientRolloutSpec(SpecSection, SpecIdentity):
    """The client rollout spec, as written and validated; the steps read it as it is."""
    RUN_ID_PREFIX = "client-rollout"

    cluster: ClusterSection = section()
    service: ServiceSpec = section()
    change: VersionChange = section()
    lane: LaneSection = section()
    window: WindowSection = section()
    judge: JudgeSection = section()             # config None: CLIENT_JUDGE
    timeouts: ClientTimeouts = section()
    run_id: RunId | None = None

    @property
    def client(self) -> dict[str, str]:
        """The librdkafka settings every client of the rollout uses."""
        return self.cluster.client

    def judge_settings(self) -> JudgeConfig:
        """The JudgeConfig of this rollout: the spec's, else CLIENT_JUDGE for the service's shape (client_judge)."""
        settings = self.judge.settings(client_judge(self.service.producers, self.service.consumers))
        return settings if self.window.warmup is None else settings.model_copy(update={"warmup_s": self.window.warmup})

    def to_dict(self) -> dict[str, Any]:
        """The spec as run.json has kept it since its schema 1, secrets masked. A resumed run compares it and a
        derived run id hashes it, so its keys stay as they are (a key added since only when given): a run.json
        written earlier must still match."""
        return {
            "cluster_dir": self.cluster.dir, "cluster": stored_cluster(self.cluster),
            "service": self.service.stored(), "from_version": self.change.from_, "to_version": self.change.to,
            "canary_partitions": self.lane.partitions, "deployer": self.cluster.deployer,
            "client": redacted(self.client), "window": self.window.duration,
            "interim_interval": self.window.interim_interval, "judge_config": self.judge.config,
            "engine": self.judge.engine, "stop_timeout": self.timeouts.stop, "drain_timeout": self.timeouts.drain,
            "lane_timeout": self.timeouts.lane, "run_id": self.run_id,
            **({"warmup": self.window.warmup} if self.window.warmup is not None else {})}


def load_client_spec(source: str | Path | dict, environ: Mapping[str, str] | None = None) -> ClientRolloutSpec:
    """A spec from a YAML/JSON file or a mapping; raises SpecError naming every bad field. With `environ`, its
    KAFKA_CANARY_CLIENT_<KEY> variables add or override the cluster's client settings."""
    spec = validated(ClientRolloutSpec, source)
    cluster = spec.cluster.model_copy(update={"client": with_environment(spec.cluster.client, environ)})
    return spec.model_copy(update={"cluster": cluster})
