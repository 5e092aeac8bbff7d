"""The provider info Airflow reads through the `apache_airflow_provider` entry point (pyproject.toml), in the shape of
the official providers' `get_provider_info.py`: the package, the `kafka_canary` connection type with its form, and
where the operators, hooks, triggers and the report link live.

Airflow calls this in every component that lists providers, so it imports neither Airflow nor the library; the
form's fields are the keys `KafkaCanaryHook.cluster_section()` reads from the connection's extras (a unit test keeps
them in step)."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import Any

PACKAGE = "kafka-canary"
INTEGRATION = "Kafka canary"
HOOK = "kafka_canary_provider.hooks.kafka_canary.KafkaCanaryHook"

# The connection form: the standard fields a cluster section has no use for are hidden; the cluster section's fields
# (deployer, dir, bootstrap_servers, docker, command, client) are stored in the extras under those names (the React
# UI writes a conn-field to the extra key of its name).
CONNECTION_FORM: dict[str, Any] = {
    "ui-field-behaviour": {
        "hidden-fields": ["schema", "port", "host", "login"],
        "relabeling": {"password": "SASL password (becomes sasl.password)"},
        "placeholders": {"password": "only for SASL: leave empty otherwise"},
    },
    "conn-fields": {
        "deployer": {
            "label": "Deployer",
            "description": "What runs the brokers: local is the embedded cluster of kafka-canary cluster up, docker "
                           "containers on a Docker engine, command your own commands (systemd over SSH, Ansible).",
            "schema": {"type": "string", "enum": ["local", "docker", "command"], "default": "local"},
        },
        "dir": {
            "label": "Cluster directory",
            "description": "local: the cluster's directory, as given to kafka-canary cluster up --dir.",
            "schema": {"type": ["string", "null"]},
        },
        "bootstrap_servers": {
            "label": "Bootstrap servers",
            "description": "docker and command: host:port of the brokers' client listener (docker: default the "
                           "containers' io.kafka-canary.address labels).",
            "schema": {"type": ["string", "null"]},
        },
        "docker": {
            "label": "Docker",
            "description": 'docker: which containers, as a JSON object, e.g. {"name": "prod-eu", "image": '
                           '"apache/kafka:{version}"} (name: their io.kafka-canary.cluster label).',
            "schema": {"type": ["object", "null"]},
        },
        "command": {
            "label": "Commands",
            "description": 'command: the fleet and its commands, as a JSON object, e.g. {"brokers": {"1": "kafka-1"}, '
                           '"roll": "ssh {host} kafka-roll {version} < {config_file}", "describe": "ssh {host} '
                           'kafka-describe"} (docs/deployers.md).',
            "schema": {"type": ["object", "null"]},
        },
        "client": {
            "label": "Client settings",
            "description": "librdkafka settings of every client of this cluster, as a JSON object, e.g. "
                           '{"security.protocol": "SASL_SSL", "sasl.mechanisms": "PLAIN", "sasl.username": "ops"}; '
                           "the password field becomes sasl.password.",
            "schema": {"type": ["object", "null"]},
        },
    },
}


def _version() -> str:
    try:
        return version(PACKAGE)
    except PackageNotFoundError:  # imported from a source tree that was never installed
        return "0+unknown"


def get_provider_info() -> dict[str, Any]:
    """The provider info dict (Airflow's provider_info.schema.json)."""
    modules = "kafka_canary_provider"
    return {
        "package-name": PACKAGE,
        "name": "Kafka canary",
        "description": "Gated canary rollouts for Apache Kafka: a hook for the cluster's connection, one operator "
                       "per rollout step, the learner warm-up trigger and the run report pages.",
        "versions": [_version()],
        "integrations": [{"integration-name": INTEGRATION, "tags": ["apache"]}],
        "operators": [{"integration-name": INTEGRATION, "python-modules": [
            f"{modules}.operators.{name}"
            for name in ("analysis", "client_rollout", "gate", "rollout", "sweep", "warm_up")]}],
        "hooks": [{"integration-name": INTEGRATION, "python-modules": [f"{modules}.hooks.kafka_canary"]}],
        "triggers": [{"integration-name": INTEGRATION, "python-modules": [f"{modules}.triggers.warm_up"]}],
        "connection-types": [{"connection-type": "kafka_canary", "hook-class-name": HOOK,
                              "hook-name": "Kafka canary cluster", **CONNECTION_FORM}],
        "extra-links": [f"{modules}.links.RolloutReportLink"],
    }
