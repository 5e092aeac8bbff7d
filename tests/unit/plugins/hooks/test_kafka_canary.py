"""KafkaCanaryHook: an Airflow Connection → the rollout spec's cluster section; the password becomes
sasl.password and is never logged."""

from __future__ import annotations

import json
import logging

import pytest
from kafka_canary_provider.hooks.kafka_canary import KafkaCanaryHook

from canary.rollout.broker.spec import load_spec

SECRET = "s3cr3t-pa55word"


def _connection(monkeypatch, conn_id: str, **fields) -> None:
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps({"conn_type": "kafka_canary", **fields}))


def test_extras_become_the_cluster_section_and_password_sasl_password(monkeypatch, caplog, capsys):
    _connection(monkeypatch, "prod_cluster", password=SECRET, extra={
        "deployer": "local", "dir": "/srv/kafka",
        "client": {"security.protocol": "SASL_SSL", "sasl.mechanisms": "PLAIN", "sasl.username": "ops"}})
    caplog.set_level(logging.DEBUG)

    section = KafkaCanaryHook("prod_cluster").cluster_section()

    assert section == {"deployer": "local", "dir": "/srv/kafka", "client": {
        "security.protocol": "SASL_SSL", "sasl.mechanisms": "PLAIN", "sasl.username": "ops",
        "sasl.password": SECRET}}
    out = capsys.readouterr()
    assert SECRET not in caplog.text + out.out + out.err
    # The section is what a rollout spec takes, and the spec masks the secret when stored.
    spec = load_spec({"cluster": section, "change": {"version": "4.1.2"}, "canary": {"count": 1}})
    assert spec.client["sasl.password"] == SECRET
    assert SECRET not in json.dumps(spec.to_dict())


def test_no_password_no_sasl_password_and_defaults(monkeypatch):
    _connection(monkeypatch, "kafka_canary_default", extra={"dir": "/tmp/c"})
    section = KafkaCanaryHook().cluster_section()
    assert section == {"deployer": "local", "dir": "/tmp/c", "client": {}}


def test_client_values_become_strings(monkeypatch):
    _connection(monkeypatch, "c1", extra={"dir": "/tmp/c", "client": {"request.timeout.ms": 30000}})
    assert KafkaCanaryHook("c1").cluster_section()["client"] == {"request.timeout.ms": "30000"}


@pytest.mark.parametrize(("extra", "match"), [
    ({"dir": "/tmp/c", "bootstrap": "x:9092"},
     "extras.bootstrap: unknown field; known fields are bootstrap_servers, client, command, deployer, dir, docker"),
    ({"dir": "/tmp/c", "client": "security.protocol=SSL"}, "extras.client: must be a mapping"),
    ({"dir": None, "deployer": "k8s"}, "extras.deployer: Input should be 'local', 'docker' or 'command'.*"),
])
def test_bad_extras_are_named(monkeypatch, extra, match):
    _connection(monkeypatch, "bad", extra=extra)
    with pytest.raises(ValueError, match=match):
        KafkaCanaryHook("bad").cluster_section()


def test_test_connection_says_what_is_wrong(monkeypatch, tmp_path):
    _connection(monkeypatch, "nowhere", extra={"dir": str(tmp_path / "no-cluster")})
    ok, message = KafkaCanaryHook("nowhere").test_connection()
    assert not ok
    assert "no-cluster" in message


def test_hook_identity():
    assert (KafkaCanaryHook.conn_type, KafkaCanaryHook.default_conn_name, KafkaCanaryHook.conn_name_attr) == (
        "kafka_canary", "kafka_canary_default", "kafka_canary_conn_id")
