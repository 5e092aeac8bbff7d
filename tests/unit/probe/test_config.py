import pytest

from canary.fields import parse_duration
from canary.kafka.secrets import MASK, redacted
from canary.probe.cli import format_summary
from canary.probe.config import ConfigError, ProbeConfig, load


def test_file_env_and_flags_layer_and_secrets_are_redacted(tmp_path):
    path = tmp_path / "client.properties"
    path.write_text("# SASL\nsecurity.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\nsasl.username=probe\n"
                    "sasl.password=hunter2\nprobe.rate=25\nprobe.rtt_sla=45s\n")
    cfg = load("h:9092", path, environ={"KAFKA_CANARY_CLIENT_SSL_KEY_PASSWORD": "s3cret"}, rate=None, duration=60.0)
    assert cfg.client["sasl.password"] == "hunter2" and cfg.client["ssl.key.password"] == "s3cret"
    assert cfg.rate == 25 and cfg.rtt_sla == 45 and cfg.duration == 60
    shown = str(cfg.describe())
    assert "hunter2" not in shown and "s3cret" not in shown and "SCRAM-SHA-512" in shown
    assert redacted({"sasl.jaas.config": "x"}) == {"sasl.jaas.config": MASK}


def test_bad_settings_are_named():
    with pytest.raises(ConfigError, match="managed by the probe"):
        ProbeConfig("h:1", client={"acks": "1"})
    with pytest.raises(ConfigError, match="bootstrap"):
        load(None, None, environ={})
    with pytest.raises(ConfigError, match="duration"):
        parse_duration("soon")
    assert parse_duration("250ms") == 0.25 and parse_duration("5m") == 300 and parse_duration(None) is None


def test_the_brokers_whose_partitions_are_probed_are_a_list_of_ids(tmp_path):
    path = tmp_path / "probe.properties"
    path.write_text("probe.leaders=3, 1\n")
    assert load("h:9092", path, environ={}).leaders == (3, 1)
    path.write_text("probe.leaders=three\n")
    with pytest.raises(ConfigError, match=r"probe.leaders='three' is not a valid"):
        load("h:9092", path, environ={})
    with pytest.raises(ConfigError, match=r"leaders must be broker ids \(integers >= 0\), got \[-1\]"):
        ProbeConfig("h:1", leaders=(-1,))


def test_summary_prints_one_row_per_lane():
    from canary.probe.runner import ProbeSummary
    from canary.probe.stats import Tally
    canary, baseline = Tally(), Tally()
    canary.counts.update(sent=10, acked=9, produce_errors=1, delivered=9)
    baseline.counts.update(sent=20, acked=20, delivered=20)
    summary = ProbeSummary("r", "p", "t", 1.0, {"baseline": baseline.to_dict(), "canary": canary.to_dict()}, {}, 0, 0,
                           {"unacknowledged": 0, "acknowledged_not_received": 0},
                           {"written": 30, "failed": 0, "dropped": 0, "pending": 0}, None)
    text = format_summary(summary)
    assert "canary" in text and "90.00%" in text and "100.00%" in text
