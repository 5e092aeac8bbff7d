"""The change's config values are checked before any restart: by the release's definitions when its jars are here,
else by a running broker (dynamic keys only, the static ones named as not checked). The checks themselves run on a
real broker and real jars in tests/integration/test_config_validation.py."""

import pytest

from canary.cluster.config_definitions import DefinitionCheck
from canary.kafka.config_validation import BrokerCheck
from canary.rollout.broker import config_check
from canary.rollout.core import RolloutError

NO_CLUSTER = None  # a check the release's definitions settle alone never asks the cluster


class Broker:
    """The admin port's config check: a running broker's answer, and what it was asked."""

    def __init__(self, answer: BrokerCheck):
        self.answer, self.asked = answer, []

    def check_broker_config(self, broker_id: int, config: dict) -> BrokerCheck:
        self.asked.append((broker_id, dict(config)))
        return self.answer


def test_refused_values_are_named_with_the_broker_s_own_message(monkeypatch):
    monkeypatch.setattr(config_check, "definition_check", lambda version, values: DefinitionCheck(
        version, invalid={"num.io.threads": "Invalid value .nan for configuration num.io.threads: Not a number"}))
    with pytest.raises(RolloutError, match=r"Kafka 4.1.2 broker refuses \(num.io.threads: Invalid value .nan .*\); "
                                           r"fix them in the spec \(nothing was changed\)"):
        config_check.check_change_config(NO_CLUSTER, {"num.io.threads": ".nan"}, "4.1.2", 1, same_version=False)


def test_without_the_release_s_jars_a_running_broker_checks_and_static_keys_are_listed(monkeypatch):
    broker = Broker(BrokerCheck(static=["replica.fetch.min.bytes"]))
    monkeypatch.setattr(config_check, "definition_check", lambda version, values: None)
    checked = config_check.check_change_config(broker, {"num.io.threads": "6", "replica.fetch.min.bytes": "9",
                                                        "log.retention.ms": None}, "4.1.2", 2, False)
    assert broker.asked == [(2, {"num.io.threads": "6", "replica.fetch.min.bytes": "9"})]  # a removed key is not parsed
    assert checked == {"keys": ["num.io.threads", "replica.fetch.min.bytes"], "by": ["broker 2"], "unknown_keys": [],
                       "not_checked": ["replica.fetch.min.bytes"]}


def test_a_change_that_only_removes_overrides_has_nothing_to_check(monkeypatch):
    monkeypatch.setattr(config_check, "definition_check", pytest.fail)
    assert config_check.check_change_config(NO_CLUSTER, {"num.io.threads": None}, "4.1.2", 1, True) == {}


def test_unknown_keys_are_reported_not_refused(monkeypatch):
    monkeypatch.setattr(config_check, "definition_check",
                        lambda version, values: DefinitionCheck(version, unknown=["a.custom.note"]))
    checked = config_check.check_change_config(NO_CLUSTER, {"a.custom.note": "x"}, "4.1.2", 1, False)
    assert checked["by"] == ["Kafka 4.1.2's definitions"] and checked["unknown_keys"] == ["a.custom.note"]


def test_on_the_same_release_the_running_broker_checks_too_and_holds_conditions_between_keys(monkeypatch):
    """The definitions judge each value alone; a running broker on the canary's release also builds its whole
    config, so a value that breaks a condition between keys is refused in its words."""
    cleaner = "log.cleaner.dedupe.buffer.size must be at least 1MB per cleaner thread."
    monkeypatch.setattr(config_check, "definition_check", lambda version, values: DefinitionCheck(version))
    broker = Broker(BrokerCheck(refused={"log.cleaner.dedupe.buffer.size": cleaner}))
    with pytest.raises(RolloutError, match="log.cleaner.dedupe.buffer.size: log.cleaner.dedupe.buffer.size must be"):
        config_check.check_change_config(broker, {"log.cleaner.dedupe.buffer.size": "1"}, "4.1.2", 1, True)
