import json

import pytest

from canary.rollout.broker.spec import load_spec
from canary.rollout.core.spec import SpecError

GOOD = {"cluster": {"dir": "/tmp/c"}, "change": {"version": "4.1.2"}, "canary": {"count": 1}}


def problems(raw) -> list[str]:
    with pytest.raises(SpecError) as err:
        load_spec(raw)
    return err.value.problems


def test_minimal_spec_gets_defaults():
    spec = load_spec(GOOD)
    assert (spec.cluster.dir, spec.change.version, spec.canary.count) == ("/tmp/c", "4.1.2", 1)
    assert (spec.probe.window, spec.probe.interim_interval, spec.judge.engine, spec.finalize) == (
        120.0, 30.0, "spark", True)


def test_durations_config_and_yaml_file(tmp_path):
    path = tmp_path / "r.yaml"
    path.write_text("cluster: {dir: /c}\nchange: {config: {num.io.threads: 6, log.cleaner.enable: false, "
                    "x.y: null}}\ncanary: {brokers: [3, 1]}\nprobe: {window: 5m, interim_interval: 45s}\n"
                    "fault: {client_delay_ms: 200}\nrun_id: r-1\n")
    spec = load_spec(path)
    assert spec.change.config == {"num.io.threads": "6", "log.cleaner.enable": "false", "x.y": None}
    assert spec.canary.brokers == [3, 1]
    assert (spec.probe.window, spec.probe.interim_interval, spec.fault.client_delay_ms, spec.run_id) == (
        300, 45, 200, "r-1")


def test_every_bad_field_is_named_at_once():
    found = problems({"cluster": {"dir": ""}, "change": {"version": "4.1"}, "canary": {"count": 0},
                      "probe": {"window": "ten minutes", "rate": -1}, "judge": {"engine": "excel"},
                      "finalize": "yes", "colour": "blue"})
    text = "\n".join(found)
    for fragment in ("cluster.dir", "change.version", "canary.count", "probe.window", "probe.rate",
                     "judge.engine", "finalize", "colour: unknown field"):
        assert fragment in text, fragment
    assert len(found) >= 8


@pytest.mark.parametrize("raw, fragment", [
    ({**GOOD, "canary": {"count": 1, "brokers": [1]}}, "exactly one of canary.count"),
    ({**GOOD, "canary": {}}, "exactly one of canary.count"),
    ({**GOOD, "canary": {"brokers": [1, 2, 1]}}, "listed twice"),
    ({**GOOD, "canary": {"brokers": ["a"]}}, "canary.brokers.0: 'a' is not a broker id: a whole number from 0 to "
                                             "2147483647"),
    ({**GOOD, "change": {}}, "say what changes"),
    ({**GOOD, "canary": {"brokers": [3], "control": [2, 3]}}, "listed as canary and as control"),
    ({**GOOD, "canary": {"count": 1, "control": [2, 2]}}, "listed twice"),
    ({**GOOD, "canary": {"count": 1, "control": "some"}}, "canary.control"),
    ({**GOOD, "canary": {"count": 1, "control": []}}, "canary.control"),
    ({**GOOD, "change": {"version": "9.9"}}, "change.version"),
    ({**GOOD, "change": {"config": {"Bad Key": "1"}}}, "not a broker config name"),
    ({**GOOD, "change": {"version": "4.1.2", "config": {"a.b": [1]}}}, "single value"),
    ({**GOOD, "probe": {"window": "30s", "interim_interval": "60s"}}, "longer than the window"),
    ({**GOOD, "probe": {"window": True}}, "probe.window"),
    ({**GOOD, "fault": {"client_delay_ms": "slow"}}, "fault.client_delay_ms"),
    ({**GOOD, "lead_topics": "orders"}, "lead_topics"),
    ({**GOOD, "run_id": "a b"}, "run_id"),
    ({**GOOD, "cluster": {"dir": "/c", "deployer": "k8s"}}, "cluster.deployer"),
    ({**GOOD, "judge": {"config": {"alpha": 7}}}, "judge.config"),
    ({**GOOD, "timeouts": {"guard": "-1s"}}, "timeouts.guard"),
])
def test_bad_inputs(raw, fragment):
    assert any(fragment in p for p in problems(raw)), problems(raw)


def test_a_window_too_short_for_the_judge_to_pass_is_refused_saying_how_long_it_must_be():
    """The default judge needs 1000 observations per lane after its 30 s warm-up: at 20 msg/s through one canary
    partition that is 80 s. Two canary brokers (two partitions) halve it; a judge asking less allows less."""
    short = {**GOOD, "probe": {"window": "1m"}}
    assert problems(short) == [
        "the spec: probe.window 1m can never promote: at 20 msg/s per partition through the canary's 1 probe "
        "partition(s) the judge needs 1000 observations per lane after its 30s warm-up (produce_error_rate's "
        "min_samples); make the window at least 80s, or raise probe.rate"]
    assert load_spec({**GOOD, "probe": {"window": "80s"}}).probe.window == 80
    assert load_spec({**short, "canary": {"count": 2}}).probe.window == 60
    quick = {"warmup_s": 5, "bucket_s": 5, "min_buckets": 2, "metrics": {
        m: {"min_samples": 50} for m in ("produce_error_rate", "consume_error_rate", "loss_rate", "duplicate_rate",
                                         "out_of_order_rate", "availability", "throughput", "e2e_latency_p50",
                                         "e2e_latency_p95", "e2e_latency_p99", "produce_latency_p99")}}
    assert load_spec({**GOOD, "probe": {"window": "15s", "interim_interval": "5s"},
                      "judge": {"config": quick}}).probe.window == 15
    assert "2 buckets of 5s after its 5s warm-up" in problems(
        {**GOOD, "probe": {"window": "14s", "interim_interval": "5s"}, "judge": {"config": quick}})[0]


def test_not_a_mapping_and_unreadable_file(tmp_path):
    assert "mapping" in problems([1, 2])[0]
    assert "cannot read" in problems(tmp_path / "missing.yaml")[0]
    bad = tmp_path / "bad.yaml"
    bad.write_text("cluster: [unclosed")
    assert "not valid YAML" in problems(bad)[0]


def test_run_id_is_stable_and_secrets_are_redacted():
    raw = {**GOOD, "cluster": {"dir": "/c", "client": {"sasl.password": "hunter2", "security.protocol": "SASL_SSL"}}}
    a, b = load_spec(raw), load_spec(json.loads(json.dumps(raw)))
    assert a.effective_run_id == b.effective_run_id and a.effective_run_id.startswith("rollout-")
    assert a.effective_run_id != load_spec({**GOOD, "canary": {"count": 2}}).effective_run_id
    assert "hunter2" not in json.dumps(a.to_dict())
    assert a.client["sasl.password"] == "hunter2"  # the clients still get it


def test_an_unknown_field_is_refused_naming_the_known_ones():
    assert problems({**GOOD, "probe": {"windw": "2m"}}) == [
        "probe.windw: unknown field; known fields are calibration, interim_interval, preflight, rate, window"]
    assert problems({**GOOD, "canary": {"count": 1}, "canaries": 2})[0].startswith(
        "canaries: unknown field; known fields are broker_metrics, canary, capacity, change, cluster, fault, "
        "finalize, judge, lead_topics")


def test_several_problems_are_reported_together_one_per_line():
    with pytest.raises(SpecError) as err:
        load_spec({**GOOD, "probe": {"window": "1s", "rate": 0}, "timeouts": {"guard": "soon"}, "run_id": "a b"})
    assert [p.split(":")[0] for p in err.value.problems] == ["probe.window", "probe.rate", "timeouts.guard", "run_id"]
    assert str(err.value).count("\n  - ") == 4


@pytest.mark.parametrize("value", ["1000000\nbroker.rack=x:canary-broker", "1\r", "a\u2028b", "x\x00"])
def test_a_config_value_with_a_line_break_is_refused(value):
    assert problems({**GOOD, "change": {"config": {"message.max.bytes": value}}}) == [
        "change.config.message.max.bytes: a value must be one line (it contains a line break)"]


@pytest.mark.parametrize("key", ["broker.rack", "node.id", "listeners", "listener.name.client.sasl.enabled.mechanisms"])
def test_a_managed_key_is_refused_even_to_remove_it(key):
    found = problems({**GOOD, "change": {"config": {key: None, "num.io.threads": "6"}}})
    assert found == [f"change.config.{key}: managed by the deployer (the canary marker travels in broker.rack; "
                     f"listeners, ids and storage are the cluster's own) and cannot be changed by a rollout"]


def test_values_are_coerced_as_written_and_booleans_are_not_numbers():
    spec = load_spec({**GOOD, "cluster": {"dir": "/c", "client": {"x.verify": False}},
                      "change": {"config": {"a.b": True, "c.d": 6, "e.f": 1.5}},
                      "probe": {"window": 60, "interim_interval": 12.5, "rate": 50}})
    assert spec.client == {"x.verify": "false"} and spec.change.config == {"a.b": "true", "c.d": "6", "e.f": "1.5"}
    assert (spec.probe.window, spec.probe.interim_interval, spec.probe.rate) == (60.0, 12.5, 50.0)
    assert isinstance(spec.probe.rate, float)
    for bad, where in [({"canary": {"count": True}}, "canary.count"), ({"canary": {"count": 1.0}}, "canary.count"),
                       ({"canary": {"brokers": [True]}}, "canary.brokers.0"), ({"probe": {"rate": True}}, "probe.rate"),
                       ({"probe": {"rate": "10"}}, "probe.rate"), ({"finalize": 1}, "finalize"),
                       ({"fault": {"client_delay_ms": False}}, "fault.client_delay_ms")]:
        assert [p.split(":")[0] for p in problems({**GOOD, **bad})] == [where], bad


def test_an_empty_section_means_its_defaults():
    spec = load_spec({**GOOD, "probe": None, "judge": None, "lead_topics": None})
    assert (spec.probe.window, spec.judge.engine, spec.lead_topics, spec.capacity) == (
        120.0, "spark", "all", "required")


def test_the_canary_leads_every_topic_and_capacity_is_required_unless_the_spec_narrows_it():
    spec = load_spec(GOOD)
    assert (spec.lead_topics, spec.capacity) == ("all", "required")
    assert (spec.traffic.tolerance, spec.traffic.min_bytes_per_s, spec.traffic.wait) == (0.5, 100_000.0, 60.0)
    narrowed = load_spec({**GOOD, "lead_topics": ["orders", "payments"], "capacity": "not_required",
                          "traffic": {"tolerance": 0.25, "min_bytes_per_s": 0, "wait": "2m"}})
    assert (narrowed.lead_topics, narrowed.capacity) == (["orders", "payments"], "not_required")
    assert (narrowed.traffic.tolerance, narrowed.traffic.wait) == (0.25, 120.0)
    assert load_spec({**GOOD, "lead_topics": "none"}).lead_topics == "none"
    for bad, where in [({"lead_topics": "some"}, "lead_topics"), ({"capacity": "maybe"}, "capacity"),
                       ({"traffic": {"tolerance": 1.5}}, "traffic.tolerance"),
                       ({"traffic": {"min_bytes_per_s": -1}}, "traffic.min_bytes_per_s"),
                       ({"traffic": {"wait": "forever"}}, "traffic.wait"),
                       ({"traffic": {"share": 1}}, "traffic.share")]:
        assert any(p.startswith(where) for p in problems({**GOOD, **bad})), bad


def test_broker_metrics_come_from_the_deployer_or_a_prometheus_without_credentials_in_the_spec():
    assert load_spec(GOOD).broker_metrics.enabled and load_spec(GOOD).broker_metrics.prometheus is None
    spec = load_spec({**GOOD, "broker_metrics": {"interval": "10s", "prometheus": {
        "url": "https://prom.example:9090", "brokers": {"1": "kafka-1", 2: "kafka-2"}}}})
    assert spec.broker_metrics.interval == 10.0
    assert spec.broker_metrics.prometheus.brokers == {1: "kafka-1", 2: "kafka-2"}
    assert problems({**GOOD, "broker_metrics": {"interval": "0s", "prometheus": {
        "url": "https://admin:hunter2@prom:9090", "brokers": {}, "window": "30 seconds"}}}) == [
        "broker_metrics.interval: '0s' must be a duration between 1s and 5m, such as 30s or 2m",
        "broker_metrics.prometheus.url: must not carry credentials (user:password@ in the URL, not repeated "
        "here); put an Authorization header in $KAFKA_CANARY_PROMETHEUS_AUTHORIZATION",
        "broker_metrics.prometheus.brokers: map each broker id to the value of broker_label on its series, e.g. "
        "{1: kafka-1}",
        "broker_metrics.prometheus.window: '30 seconds' must be a Prometheus duration such as 30s or 1m"]


def test_the_load_is_a_rate_or_auto_and_anything_else_says_both():
    assert load_spec(GOOD).load.rate == "auto" and load_spec({**GOOD, "load": {"rate": 300}}).load.rate == 300.0
    assert load_spec({**GOOD, "load": {"rate": 0}}).load.rate == 0.0
    assert load_spec({**GOOD, "load": {"rate": "auto", "record_size": 500}}).load.rate == "auto"
    hint = "must be records/s per partition from 0 (no load) to 100000, or auto (what the cluster's own traffic " \
           "lacks to be representative, sized in preflight)"
    for bad in ("fast", -1, True, "300"):
        assert problems({**GOOD, "load": {"rate": bad}}) == [f"load.rate: {bad!r} {hint}"]


def test_the_docker_deployer_names_its_containers_and_the_local_one_its_directory():
    docker = {"name": "prod-eu", "image": "r/kafka:{version}", "stop_timeout": "5m"}
    spec = load_spec({**GOOD, "cluster": {"deployer": "docker", "docker": docker}})
    assert (spec.cluster.docker.name, spec.cluster.docker.image, spec.cluster.docker.stop_timeout) == (
        "prod-eu", "r/kafka:{version}", 300)
    text = "\n".join(problems({**GOOD, "cluster": {"deployer": "docker"}})
                     + problems({**GOOD, "cluster": {"deployer": "docker", "docker": {"name": "a b", "image": "x"}}})
                     + problems({**GOOD, "cluster": {"deployer": "ssh", "dir": "/c"}}))
    for fragment in ("cluster.docker: is required with deployer docker", "cluster.docker.name",
                     "cluster.docker.image: must contain {version}", "cluster.deployer"):
        assert fragment in text, (fragment, text)
