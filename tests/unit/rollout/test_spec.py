import json

import pytest

from canary.rollout.spec import SpecError, load_spec

GOOD = {"cluster": {"dir": "/tmp/c"}, "change": {"version": "4.1.2"}, "canary": {"count": 1}}


def problems(raw) -> list[str]:
    with pytest.raises(SpecError) as err:
        load_spec(raw)
    return err.value.problems


def test_minimal_spec_gets_defaults():
    spec = load_spec(GOOD)
    assert (spec.cluster_dir, spec.change.version, spec.canary_count) == ("/tmp/c", "4.1.2", 1)
    assert (spec.window, spec.interim_interval, spec.engine, spec.finalize) == (120.0, 30.0, "spark", True)


def test_durations_config_and_yaml_file(tmp_path):
    path = tmp_path / "r.yaml"
    path.write_text("cluster: {dir: /c}\nchange: {config: {num.io.threads: 6, log.cleaner.enable: false, "
                    "x.y: null}}\ncanary: {brokers: [3, 1]}\nprobe: {window: 5m, interim_interval: 45s}\n"
                    "fault: {client_delay_ms: 200}\nrun_id: r-1\n")
    spec = load_spec(path)
    assert spec.change.config == {"num.io.threads": "6", "log.cleaner.enable": "false", "x.y": None}
    assert spec.canary_brokers == (3, 1)
    assert (spec.window, spec.interim_interval, spec.fault.client_delay_ms, spec.run_id) == (300, 45, 200, "r-1")


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
    ({**GOOD, "canary": {"brokers": ["a"]}}, "canary.brokers.0: Input should be a valid integer"),
    ({**GOOD, "change": {}}, "say what changes"),
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
