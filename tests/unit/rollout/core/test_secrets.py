"""Secrets of a rollout: a password reaches the clients (from the spec or the environment) and no file of the run."""

import json

from canary.kafka.secrets import MASK, scrub_text
from canary.kafka.settings import kafka_python_settings
from canary.rollout.broker import Rollout
from canary.rollout.broker.spec import load_spec
from canary.rollout.core.run import RunState

PASSWORD = 'pa"ss\\word-42'
RAW = {"cluster": {"dir": "/c", "client": {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
                                           "sasl.username": "admin", "enable.ssl.certificate.verification": True}},
       "change": {"config": {"num.io.threads": "6"}}, "canary": {"count": 1}, "run_id": "secured"}


class FakeDeployer:
    bootstrap_servers = "127.0.0.1:1"


def test_the_environment_adds_the_password_without_changing_the_run():
    plain = load_spec(RAW)
    spec = load_spec(RAW, environ={"KAFKA_CANARY_CLIENT_SASL_PASSWORD": PASSWORD, "OTHER": "x"})
    assert spec.client["sasl.password"] == PASSWORD and "sasl.password" not in plain.client
    assert spec.client["enable.ssl.certificate.verification"] == "true"  # librdkafka's spelling of a YAML boolean
    assert spec.secret_values == [PASSWORD]
    assert spec.to_dict()["client"]["sasl.password"] == MASK
    assert PASSWORD not in json.dumps(spec.to_dict())
    assert load_spec(RAW, environ={}).client == plain.client  # no KAFKA_CANARY_CLIENT_* variable: as written
    # The environment overrides the file, as for the probe.
    written = {**RAW, "cluster": {**RAW["cluster"], "client": {**RAW["cluster"]["client"], "sasl.password": "old"}}}
    assert load_spec(written, environ={"KAFKA_CANARY_CLIENT_SASL_PASSWORD": "new"}).client["sasl.password"] == "new"


def test_kafka_python_gets_the_same_credentials():
    spec = load_spec(RAW, environ={"KAFKA_CANARY_CLIENT_SASL_PASSWORD": PASSWORD})
    settings = kafka_python_settings({**spec.client, "security.protocol": "sasl_ssl"})
    assert settings == {"security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512",
                        "sasl_plain_username": "admin", "sasl_plain_password": PASSWORD}


def test_no_file_of_the_run_holds_a_secret_even_in_an_error_message(tmp_path):
    spec = load_spec(RAW, environ={"KAFKA_CANARY_CLIENT_SASL_PASSWORD": PASSWORD})
    rollout = Rollout(spec, tmp_path / "run", deployer=FakeDeployer())
    rollout.state.step_started("preflight")
    rollout.state.step_failed("preflight", f"a library quoted the settings: sasl.password={PASSWORD}")
    rollout.audit.record("preflight", "step failed", error=f"login {PASSWORD} refused",
                         settings={"sasl.password": PASSWORD}, nested=[{"text": f"x{PASSWORD}y"}])
    for path in (tmp_path / "run").iterdir():
        text = path.read_text()
        assert PASSWORD not in text and json.dumps(PASSWORD)[1:-1] not in text, path
    assert f"login {MASK} refused" in rollout.audit.entries()[-1]["error"]
    error = RunState.open(tmp_path / "run", "secured", spec.to_dict()).record.steps["preflight"].error
    assert error is not None and error.endswith("sasl.password=***")


def test_scrub_text_cuts_raw_and_json_escaped_values():
    assert scrub_text(json.dumps({"e": f"<{PASSWORD}>"}), [PASSWORD]) == '{"e": "<' + MASK + '>"}'
    assert scrub_text("nothing secret", [PASSWORD, ""]) == "nothing secret"


def test_the_migration_canary_masks_every_secret_setting_not_only_passwords(tmp_path):
    from canary.rollout.migration import MigrationSpec

    client = {"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER",
              "sasl.oauthbearer.client.secret": "oauth-s3cret", "sasl.password": PASSWORD}
    spec = MigrationSpec(bootstrap_servers="127.0.0.1:9092", topic="t", group="g", out_dir=tmp_path, client=client)
    written = json.dumps(spec.to_dict())
    assert "oauth-s3cret" not in written and PASSWORD not in written
    assert json.loads(written)["client"]["sasl.oauthbearer.client.secret"] == MASK
    assert json.loads(written)["client"]["security.protocol"] == "SASL_SSL"
