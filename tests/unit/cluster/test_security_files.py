"""The secured local cluster's settings: server.properties of a SASL_SSL broker, the files holding the secrets,
the client settings with and without the password, and the connection trouble named in health errors."""

import json
import stat

import pytest
from confluent_kafka import KafkaError

from canary.cluster import node_config, security
from canary.cluster.distribution import _argfile_quote
from canary.cluster.state import ClusterState, NodeState
from canary.errors import ClusterError
from canary.kafka import health

SECRETS = security.Secrets("admin", "s3cr3t-sasl-pw", "st0re-pw")


def _secured_state(tmp_path):
    nodes = [NodeState(3000, "controller", "3.9.2", 9000)]
    nodes += [NodeState(i, "broker", "3.9.2", 9000 + i, replication_port=9100 + i) for i in (1, 2, 3)]
    return ClusterState("id", str(tmp_path), "3.9", "320m", "192m", nodes, security="sasl_ssl")


def _props(text):
    return dict(line.split("=", 1) for line in text.splitlines())


def test_a_secured_broker_takes_clients_on_sasl_ssl_and_replicates_on_loopback(tmp_path):
    state = _secured_state(tmp_path)
    node = state.node(2)
    props = _props(node_config.render(state, node, security.broker_properties(tmp_path, 2, SECRETS)))
    assert props["listeners"] == "CLIENT://127.0.0.1:9002,REPLICATION://127.0.0.1:9102"
    assert props["listener.security.protocol.map"] == "CONTROLLER:PLAINTEXT,CLIENT:SASL_SSL,REPLICATION:PLAINTEXT"
    assert props["inter.broker.listener.name"] == "REPLICATION"
    assert props["listener.name.client.sasl.enabled.mechanisms"] == "SCRAM-SHA-512"
    # The broker side of SCRAM holds no credentials: the users are in the metadata log.
    assert props["listener.name.client.scram-sha-512.sasl.jaas.config"] == (
        "org.apache.kafka.common.security.scram.ScramLoginModule required;")
    assert props["ssl.keystore.location"] == str(tmp_path / "security" / "broker-2.p12")
    assert SECRETS.password not in node_config.render(state, node, security.broker_properties(tmp_path, 2, SECRETS))

    node.client_delay_ms, node.proxy_port = 50.0, 9999  # TLS passes through the delay proxy
    props = _props(node_config.render(state, node, security.broker_properties(tmp_path, 2, SECRETS)))
    assert props["advertised.listeners"] == "CLIENT://127.0.0.1:9999,REPLICATION://127.0.0.1:9102"


def test_controllers_stay_plaintext_and_a_secured_broker_without_its_settings_is_refused(tmp_path):
    state = _secured_state(tmp_path)
    assert _props(node_config.render(state, state.node(3000)))["listener.security.protocol.map"] == \
        "CONTROLLER:PLAINTEXT"
    with pytest.raises(ClusterError, match="needs its security settings"):
        node_config.render(state, state.node(1))


@pytest.mark.parametrize("key", ["ssl.keystore.password", "ssl.keystore.location", "sasl.enabled.mechanisms",
                                 "listener.name.client.scram-sha-512.sasl.jaas.config"])
def test_security_keys_cannot_be_overridden(key):
    with pytest.raises(ClusterError, match="managed by the local cluster"):
        node_config.validate_overrides({key: "x"})


def test_secrets_file_is_private_and_the_client_file_has_no_password(tmp_path):
    security.save_secrets(tmp_path, SECRETS)
    secrets_file = tmp_path / "security" / "secrets.json"
    assert stat.S_IMODE(secrets_file.stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "security").stat().st_mode) == 0o700
    assert json.loads(secrets_file.read_text())["sasl.password"] == SECRETS.password
    assert security.load_secrets(tmp_path) == SECRETS
    client_file = (tmp_path / "security" / "client.properties").read_text()
    assert "security.protocol=SASL_SSL" in client_file and "sasl.username=admin" in client_file
    assert SECRETS.password not in client_file and SECRETS.store_password not in client_file


def test_client_settings_with_and_without_the_password(tmp_path):
    without = security.client_settings(tmp_path, SECRETS, with_secret=False)
    assert without == {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "admin",
                       "ssl.ca.location": str(tmp_path / "security" / "ca.pem")}
    assert security.client_settings(tmp_path, SECRETS) == without | {"sasl.password": SECRETS.password}
    java = security.java_client_properties(tmp_path, SECRETS)
    assert 'username="admin" password="s3cr3t-sasl-pw";' in java and "ssl.truststore.type=PKCS12" in java
    assert security.scram_format_arg(SECRETS) == "SCRAM-SHA-512=[name=admin,password=s3cr3t-sasl-pw]"


def test_java_client_config_is_private_and_removed(tmp_path):
    security.save_secrets(tmp_path, SECRETS)
    with security.java_client_config(tmp_path) as path:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert SECRETS.password in path.read_text()
    assert not path.exists()


def test_missing_credentials_and_unknown_mode_are_named(tmp_path):
    with pytest.raises(ClusterError, match="has no credentials file"):
        security.load_secrets(tmp_path)
    with pytest.raises(ClusterError, match="security 'ssl' is not known; use one of plaintext, sasl_ssl"):
        security.check_mode("ssl")


def test_argfile_quoting_keeps_an_argument_whole():
    assert _argfile_quote('a b"c\\d') == '"a b\\"c\\\\d"'


def test_connection_trouble_names_a_refused_login_a_tls_failure_and_a_plaintext_client():
    trouble = health.ConnectionTrouble()
    assert trouble.cause() is None
    trouble.config()["error_cb"](KafkaError(KafkaError._SSL, "SSL handshake failed: certificate verify failed"))
    assert "check security.protocol and ssl.ca.location" in trouble.cause()
    trouble.config()["error_cb"](KafkaError(KafkaError._AUTHENTICATION, "SASL authentication error: invalid"))
    assert trouble.cause().endswith("(check sasl.username and sasl.password)")

    plain = health.ConnectionTrouble()
    plain.logger.info("FAIL 127.0.0.1:9092/bootstrap: Disconnected: connection closed by peer: receive 0 after "
                      "POLLIN (after 1ms in state APIVERSION_QUERY)")
    assert "needs security.protocol SASL_SSL" in plain.cause()


def test_health_check_names_unusable_client_settings():
    seen = health.check("127.0.0.1:1", [1], timeout=1, client_config={"security.protocol": "SASL_SSL",
                                                                       "sasl.mechanism": "SCRAM-SHA-512"})
    assert "client settings for 127.0.0.1:1 are not usable" in seen.error and "sasl.password" in seen.error
