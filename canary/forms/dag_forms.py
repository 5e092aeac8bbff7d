"""The trigger forms of the three DAGs: the broker rollout's (BROKER_FORM), the client rollout's (CLIENT_FORM) and the
health sweep's (SWEEP_FORM), each over its spec model, with the options models of the params the DAGs read
themselves (the cluster's Airflow connection, what to do on INCONCLUSIVE, who started the run)."""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import AfterValidator, Field

from canary.fields import DURATION_PATTERN, SpecModel
from canary.files import shown
from canary.forms.form import Form, FormField
from canary.kafka.versions import TARGET_VERSION
from canary.rollout.broker.spec import BrokerRolloutSpec
from canary.rollout.client.spec import ClientRolloutSpec
from canary.sweep.config import SweepConfig

CONN_ID_PATTERN = r"^[A-Za-z0-9_-][A-Za-z0-9_.-]{0,249}$"  # Airflow's own rule for connection ids, no leading dot


def _connection_id(value: str) -> str:
    if value and not re.match(CONN_ID_PATTERN, value):
        raise ValueError(f"{shown(value, 100)} is not an Airflow connection id: up to 250 letters, digits, '_', '-' "
                         f"or '.' (not starting with '.'), not a path")
    return value


# An Airflow connection id: it lands in the API's URL path, so never a path of its own (`../…`).
ConnectionId = Annotated[str, Field(min_length=1, json_schema_extra={"pattern": CONN_ID_PATTERN}),
                         AfterValidator(_connection_id)]


class RolloutOptions(SpecModel):
    cluster_conn_id: ConnectionId = "kafka_canary_default"
    on_inconclusive: Literal["ask", "rollback"] = "ask"
    # what the run's report and the runs index say started it; Airflow tells a manual run from the UI and one from
    # the REST API apart to no task, so the release pipeline says so itself
    started_by: Literal["", "release"] = ""


def _each_once(values: list[str]) -> list[str]:
    twice = sorted({v for v in values if values.count(v) > 1})
    if twice:
        raise ValueError(f"{twice} are listed twice")
    return values


class SweepOptions(SpecModel):
    clusters: Annotated[list[ConnectionId], AfterValidator(_each_once),
                        Field(json_schema_extra={"uniqueItems": True})] = []


_CONNECTION = FormField("cluster_conn_id", (), "Cluster connection",
                        "Airflow connection (type kafka_canary) of the cluster to roll")
_ON_INCONCLUSIVE = FormField("on_inconclusive", (), "On INCONCLUSIVE", "ask: a person approves or rejects (rollback "
                             "after 4 h); rollback: roll back without asking")
_STARTED_BY = FormField("started_by", (), "Started by", "Leave empty; the release pipeline (kafka-canary release) "
                         "sets release, which the report and the runs index show")
_INTERIM = "Time between interim looks that can stop the window early"
_ENGINE = "spark: the Spark analysis task decides; inline: the judge in-process"
_IN_SPEC = {"cluster": {"deployer": "local", "dir": "(the connection's)"}, "run_id": "form-check"}

BROKER_FORM = Form(BrokerRolloutSpec, RolloutOptions, (
    _CONNECTION,
    FormField("target_version", ("change", "version"), "Target Kafka version",
              "Version the canary brokers get, then the fleet; empty keeps each broker's version (a config-only "
              "change)", TARGET_VERSION),
    FormField("config_overrides", ("change", "config"), "Broker config overrides",
              'Broker settings the change applies, e.g. {"num.io.threads": "6"}; null removes an override'),
    FormField("canary_count", ("canary", "count"), "Canary brokers (count)",
              "How many brokers become canaries (the highest ids), unless canary broker ids are given", 1,
              unless="canary_brokers"),
    FormField("canary_brokers", ("canary", "brokers"), "Canary broker ids",
              "Explicit canary broker ids; empty uses the count", []),
    FormField("canary_control", ("canary", "control"), "Control brokers",
              "Baseline brokers restarted with nothing changed beside the canary, which its own broker metrics are "
              'compared with (a just-restarted broker works harder than one that has run for hours): "auto" (one, '
              'when the cluster has a broker to spare), "none", or ids such as [3]'),
    FormField("window", ("probe", "window"), "Probe window", "How long probe traffic is judged, e.g. 90s or 2m"),
    FormField("interim_interval", ("probe", "interim_interval"), "Interim look interval", _INTERIM),
    FormField("probe_rate", ("probe", "rate"), "Probe rate", "Probe messages per second per partition"),
    FormField("preflight_probe", ("probe", "preflight"), "Preflight probe",
              "Length of the green baseline probe in preflight and verify"),
    FormField("calibration_probe", ("probe", "calibration"), "Calibration probe",
              "Preflight's probe runs at least this long to measure each broker before the change; 0s: none"),
    FormField("judge_config", ("judge", "config"), "Judge config",
              'Judge thresholds (canary/judge/README.md), e.g. {"warmup_s": 5}; empty uses the defaults', {},
              schema={"type": "object"}),
    FormField("engine", ("judge", "engine"), "Analysis engine", _ENGINE),
    FormField("finalize", ("finalize",), "Finalize features",
              "Raise finalized feature levels in the finalize task once the promoted fleet has baked (no binary "
              "rollback after)"),
    FormField("bake", ("promote", "bake"), "Bake before finalize",
              "How long the promoted fleet runs before the finalize task may raise the feature levels, e.g. 10m; "
              "the task is skipped until then (clear it after the bake)"),
    FormField("promote_max_batch", ("promote", "max_batch"), "Promotion batch size",
              "Up to this many brokers of one rack restart together when the safe-roll guard proves every partition "
              "keeps min.insync.replicas; 1: one at a time"),
    FormField("promote_waves", ("promote", "waves"), "Promotion waves",
              'Gated waves, each a cumulative share of the brokers with a look between, e.g. ["25%", "50%", "all"]; '
              '["all"]: one wave; auto: 25 %, 50 %, all from six brokers on, one wave below',
              schema={"type": ["string", "array"], "items": {"type": "string"}}),
    FormField("promote_look", ("promote", "look"), "Look between waves",
              "How long the promoted brokers are compared with the rest after each wave but the last, e.g. 1m"),
    _ON_INCONCLUSIVE,
    _STARTED_BY,
    FormField("lead_topics", ("lead_topics",), "Lead topics",
              'Whose partitions the canary brokers lead (their preferred ones), so the canary carries its share of '
              'real traffic: "all" (every topic, as a finished roll would), a list such as ["orders"], or "none" '
              "(the probe's alone)"),
    FormField("capacity", ("capacity",), "Capacity judgement",
              "required: a PROMOTE whose window had no representative traffic through a canary carrying its fair "
              "share is INCONCLUSIVE (a person decides); not_required: the probe may promote alone, and the report "
              "says capacity was not judged"),
    FormField("traffic", ("traffic",), "Traffic share",
              'When the canary\'s share of client traffic counts, and the catch-up reads of the user topics: '
              '{"tolerance": 0.5, "min_bytes_per_s": 100000, "wait": "1m", "catch_up_bytes": 1048576, '
              '"catch_up_partitions": 2, "catch_up_interval": "5s"} (docs/broker-rollout.md); {} uses these defaults',
              schema={"type": "object"}),
    FormField("load_rate", ("load", "rate"), "Load (records/s per partition)",
              "Load through every broker alike during the window, so a change that cuts capacity shows in the "
              "brokers' metrics; auto: only what the cluster's own traffic lacks to be representative, within "
              "load.ceiling_bytes_per_s per broker and none on a busy cluster (docs/broker-rollout.md); 0: none"),
    FormField("load_record_size", ("load", "record_size"), "Load record size (bytes)", "Bytes per load record"),
    FormField("broker_metrics", ("broker_metrics",), "Broker metrics",
              'Where the brokers\' own metrics are read: {} the deployer\'s (the metrics agents of brokers in our '
              'images); {"prometheus": {"url": …, "brokers": {"1": "kafka-1"}}}; {"exporters": {"1": "http://…"}}; '
              '{"enabled": false} judges the probe alone', schema={"type": "object"}),
    FormField("client_delay_ms", ("fault", "client_delay_ms"), "Fault: client delay (ms)",
              "Scenarios only: a delay proxy in front of each canary broker"),
    FormField("warm_up_timeout", ("timeouts", "warm_up"), "Warm-up timeout",
              "How long a canary broker may take to rejoin every ISR"),
    FormField("guard_timeout", ("timeouts", "guard"), "Safe-roll guard timeout",
              "How long the safe-roll guard may take to allow a restart"),
), _IN_SPEC)

CLIENT_FORM = Form(ClientRolloutSpec, RolloutOptions, (
    FormField(_CONNECTION.name, (), _CONNECTION.title,
              "Airflow connection (type kafka_canary) of the service's cluster"),
    FormField("service_name", ("service", "name"), "Service",
              "The service; its instances are named <service>-producer-0, …", "orders"),
    FormField("topic", ("service", "topic"), "Topic", "The topic the service produces to and consumes from",
              "orders"),
    FormField("group", ("service", "group"), "Consumer group", "The consumers' group id (their committed offsets)",
              "orders-billing"),
    FormField("fleet_dir", ("service", "dir"), "Fleet directory",
              "The service deployer's directory: instance state, logs"),
    FormField("producers", ("service", "producers"), "Baseline producer instances",
              "Producer instances of the baseline lane (a canary one is added)"),
    FormField("consumers", ("service", "consumers"), "Baseline consumer instances",
              "Consumer instances of the baseline lane (a canary one is added)"),
    FormField("rate", ("service", "rate"), "Records/s per producer",
              "The sample producer's rate (records per second per instance)"),
    FormField("observation_id", ("service", "observation_id"), "Observation run id",
              "The run id the fleet's observations carry; empty: <service>-service"),
    FormField("service_command", ("service", "command"), "Service command",
              'Your own service, any language: {"consumer": ["java", "-jar", "billing-{version}.jar"]} (an argument '
              "list per role, placeholders and environment in docs/clients.md); empty: the sample services", {},
              schema={"type": "object"}),
    FormField("service_env", ("service", "env"), "Service environment",
              'Added to every instance\'s environment, e.g. {"JAVA_OPTS": "-Xmx256m"}', {},
              schema={"type": "object"}),
    FormField("service_cwd", ("service", "cwd"), "Service directory",
              "The instances' working directory (your service's files); empty: the fleet directory"),
    FormField("from_version", ("change", "from"), "Current version",
              "The version every instance runs before the rollout", "v1"),
    FormField("to_version", ("change", "to"), "New version",
              "The version the canary instances get, then the fleet", "v2"),
    FormField("canary_partitions", ("lane", "partitions"), "Canary partitions",
              "How many of the topic's partitions the canary lane gets"),
    FormField("window", ("window", "duration"), "Window", "How long the lanes are compared, e.g. 60s or 5m"),
    FormField("interim_interval", ("window", "interim_interval"), "Interim look interval", _INTERIM),
    FormField("warmup", ("window", "warmup"), "Warm-up",
              "How long from the window's start is not judged, e.g. 30s for a JVM service (a cold JIT against a warm "
              "baseline); empty: the judge's 5s", "",
              schema={"type": ["null", "string"], "pattern": f"^$|{DURATION_PATTERN}"}),
    FormField("judge_config", ("judge", "config"), "Judge config",
              "Judge thresholds; empty uses the client rollout's defaults", {}, schema={"type": "object"}),
    FormField("engine", ("judge", "engine"), "Analysis engine", _ENGINE),
    _ON_INCONCLUSIVE,
    _STARTED_BY,
    FormField("stop_timeout", ("timeouts", "stop"), "Stop timeout",
              "How long an instance may take to stop before it is killed"),
    FormField("drain_timeout", ("timeouts", "drain"), "Drain timeout",
              "Rollback: how long canary consumers may take to finish the canary partitions"),
    FormField("lane_timeout", ("timeouts", "lane"), "Lane timeout",
              "How long opening or closing the lane may take (reassignments, elections)"),
), _IN_SPEC)

SWEEP_FORM = Form(SweepConfig, SweepOptions, (
    FormField("clusters", (), "Clusters", "Connection ids to sweep; empty: the Variable kafka_canary_sweep_clusters "
              '(default ["kafka_canary_default"])'),
    FormField("duration", ("duration",), "Probe duration", "Probe traffic per cluster, e.g. 30s or 1m"),
    FormField("probe_rate", ("rate",), "Probe rate", "Probe messages per second per partition"),
    FormField("reference_sweeps", ("reference_sweeps",), "Reference sweeps",
              "How many of the cluster's latest healthy sweeps are pooled as the reference"),
    FormField("judge_config", ("judge",), "Judge config",
              "Judge thresholds merged over the sweep's defaults (canary/judge/README.md), e.g. "
              '{"metrics": {"e2e_latency_p99": {"slo": 500}}}', {}, schema={"type": "object"}),
), {"bootstrap_servers": "(the connection's)"})
