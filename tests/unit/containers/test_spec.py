"""A container's spec as read from `docker inspect` and written back as a label: what a roll re-creates."""

from __future__ import annotations

from types import SimpleNamespace

from canary.containers.spec import PREVIOUS, ContainerSpec

HEALTH = {"Test": ["CMD-SHELL", "kafka-broker-api-versions.sh --bootstrap-server localhost:9092"],
          "Interval": 15_000_000_000, "Timeout": 20_000_000_000, "Retries": 10}


def inspected(**host) -> SimpleNamespace:
    """A container as `docker inspect` shows one compose made: a bridge network with aliases, a healthcheck."""
    return SimpleNamespace(attrs={
        "Id": "0123456789abcdef", "Name": "/stack-broker-1-1",
        "Config": {"Image": "apache/kafka:3.9.2", "Hostname": "0123456789ab",
                   "Env": ["KAFKA_NODE_ID=1", "PATH=/usr/bin", "KAFKA_NUM_IO_THREADS=6"],
                   "Labels": {"com.docker.compose.service": "broker-1", PREVIOUS: "{}"},
                   "Cmd": None, "Entrypoint": ["/etc/kafka/docker/run"], "User": "appuser", "Healthcheck": HEALTH},
        "HostConfig": {"NetworkMode": "stack_default", "PortBindings": {"19092/tcp": [{"HostPort": "19092"}]},
                       "RestartPolicy": {"Name": "unless-stopped"}, "Init": True, **host},
        "NetworkSettings": {"Networks": {"stack_default": {"Aliases": ["broker-1", "0123456789ab"]}}},
        "Mounts": [{"Type": "volume", "Name": "stack_kafka-broker-1-data", "Destination": "/var/lib/kafka/data",
                    "RW": True}]})


def test_the_spec_keeps_what_compose_gave_the_container() -> None:
    spec = ContainerSpec.of(inspected(), image_environment=["PATH=/usr/bin"])  # type: ignore[arg-type]
    assert spec.environment == {"KAFKA_NODE_ID": "1", "KAFKA_NUM_IO_THREADS": "6"}  # the image's own left to it
    assert spec.networks == {"stack_default": ["broker-1"]}
    assert (spec.healthcheck, spec.init, spec.user) == (HEALTH, True, "appuser")
    assert spec.mounts == [{"type": "volume", "source": "stack_kafka-broker-1-data", "target": "/var/lib/kafka/data",
                            "read_only": False}]


def test_the_label_form_round_trips_without_the_spec_it_replaced() -> None:
    spec = ContainerSpec.of(inspected(), image_environment=[])  # type: ignore[arg-type]
    again = ContainerSpec.from_json(spec.to_json())
    assert PREVIOUS not in again.labels
    assert again == ContainerSpec(**{**spec.__dict__, "labels": {k: v for k, v in spec.labels.items()
                                                                   if k != PREVIOUS}})
