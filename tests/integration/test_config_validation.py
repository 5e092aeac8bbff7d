"""Config values checked as a broker checks them, before any restart: a running broker's validate-only AlterConfigs
(dynamic keys; a static key is named, not judged) and a release's own definitions from its jars (every key)."""

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, ResourceType

from canary.cluster.config_definitions import definition_check
from canary.cluster.distribution import BASELINE_VERSION, TARGET_VERSION
from canary.kafka.config_validation import broker_check

pytestmark = [pytest.mark.integration, pytest.mark.parallel]

VALUES = {"num.io.threads": ".nan", "num.network.threads": "0", "replica.fetch.min.bytes": "abc",
          "message.max.bytes": "100", "a.custom.note": "x", "log.cleaner.dedupe.buffer.size": "1",
          "num.replica.fetchers": "50"}


def _dynamic_config(bootstrap: str) -> dict[str, str]:
    resource = ConfigResource(ResourceType.BROKER, "1")
    admin = AdminClient({"bootstrap.servers": bootstrap})  # held until the answer: a dropped client cancels it
    entries = admin.describe_configs([resource])[resource].result(timeout=15)
    return {k: e.value for k, e in entries.items() if e.source == ConfigSource.DYNAMIC_BROKER_CONFIG.value}


def test_a_running_broker_refuses_bad_dynamic_values_in_its_own_words_and_changes_nothing(shared_cluster):
    before = _dynamic_config(shared_cluster.bootstrap_servers)
    checked = broker_check(shared_cluster.bootstrap_servers, None, 1, VALUES)
    assert checked.refused == {
        "num.io.threads": "Invalid value .nan for configuration num.io.threads: Not a number of type INT",
        "num.network.threads": "Invalid value 0 for configuration num.network.threads: Value must be at least 1",
        # a condition between keys, which only a broker building its whole config sees
        "log.cleaner.dedupe.buffer.size": "requirement failed: log.cleaner.dedupe.buffer.size must be at least 1MB "
                                          "per cleaner thread."}
    # static, and a thread count beyond double the current one (refused as a live change only: a restart takes it)
    assert checked.static == ["num.replica.fetchers", "replica.fetch.min.bytes"]
    assert broker_check(shared_cluster.bootstrap_servers, None, 1, {"message.max.bytes": "100"}).refused == {}
    assert _dynamic_config(shared_cluster.bootstrap_servers) == before  # validate-only: nothing was set


@pytest.mark.parametrize("version", [BASELINE_VERSION, TARGET_VERSION])
def test_a_release_s_definitions_refuse_bad_values_static_keys_too(version):
    checked = definition_check(version, VALUES)
    assert checked is not None, f"Kafka {version}'s jars are in the cache (make setup) and javac is installed"
    # each value alone: the cleaner's buffer is a valid size, too small only for its threads (the broker's part)
    assert set(checked.invalid) == {"num.io.threads", "num.network.threads", "replica.fetch.min.bytes"}
    assert checked.invalid["replica.fetch.min.bytes"].endswith("Not a number of type INT")
    assert checked.unknown == ["a.custom.note"]
    assert definition_check("9.9.9", VALUES) is None  # no jars of that release here: the broker checks instead
