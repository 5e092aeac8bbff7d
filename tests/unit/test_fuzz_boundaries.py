"""The boundaries fuzzed: whatever a spec file or an observation record holds, the loader either returns a valid
object or raises its own clean error (SpecError, MigrationSpecError, BadObservation) — never another exception —
and no broker config value of a valid rollout spec puts a second line into a properties file."""

from __future__ import annotations

import contextlib
import copy
import json
import os
import tempfile

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from canary.judge.config import ConfigError, JudgeConfig, config_from_dict
from canary.kafka.broker_config import properties_line
from canary.observations import BadObservation, Observation, read_observations
from canary.rollout.broker.spec import BrokerRolloutSpec, load_spec
from canary.rollout.client.spec import ClientRolloutSpec, load_client_spec
from canary.rollout.core.spec import SpecError
from canary.rollout.migration.spec import MigrationSpec, MigrationSpecError, load_migration_spec
from canary.sweep import SweepConfig, SweepError

FUZZ = settings(max_examples=200, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

BROKER = {"cluster": {"dir": "/tmp/c", "client": {"security.protocol": "PLAINTEXT"}},
          "change": {"version": "4.1.2", "config": {"num.io.threads": "6"}}, "canary": {"count": 1},
          "probe": {"window": "2m", "interim_interval": "30s", "rate": 20, "preflight": "5s"},
          "judge": {"engine": "inline"}, "finalize": True, "lead_topics": ["orders"], "fault": {"client_delay_ms": 0},
          "timeouts": {"warm_up": "5m", "guard": "1m"}, "run_id": "r-1"}
CLIENT = {"cluster": {"dir": "/tmp/kc"},
          "service": {"name": "orders", "topic": "orders", "group": "billing", "dir": "/tmp/fleet", "producers": 1,
                      "consumers": 2, "rate": 10, "observation_id": "orders-svc"},
          "change": {"from": "v1", "to": "v2"}, "lane": {"partitions": 2},
          "window": {"duration": "30s", "interim_interval": "10s"}, "judge": {"engine": "inline"},
          "timeouts": {"stop": "20s", "drain": "1m", "lane": "1m"}, "run_id": "client-42"}
MIGRATION = {"bootstrap_servers": "127.0.0.1:9092", "topic": "orders", "group": "billing", "out_dir": "/tmp/m",
             "baseline": 2, "canary": 1, "rate": 30, "window_s": 40, "disturb_at_s": 12, "restart_gap_s": 2,
             "classic_assignor": "range", "remote_assignor": "uniform", "client": {"security.protocol": "PLAINTEXT"},
             "action": "auto", "settle_timeout_s": 60, "run_id": "billing-1"}
JUDGE = {"version": 1, "alpha": 0.02, "warmup_s": 5, "bucket_s": 5, "min_buckets": 2, "max_excluded_share": 0.1,
         "metrics": {"e2e_latency_p99": {"rel_floor": 0.2, "critical": False, "slo": 500},
                     "loss_rate": {"tolerance": 1e-6}, "throughput": {"enabled": False},
                     "lag_p90": {"kind": "quantile", "source": "lag", "quantile": 0.9, "abs_floor": 10}}}
SWEEP = {"bootstrap_servers": "127.0.0.1:9092", "cluster_name": "prod-eu", "client": {"security.protocol": "SSL"},
         "duration": "30s", "rate": 10, "message_size": 100, "topic": "__kafka_canary", "judge": {"alpha": 0.02},
         "reference_sweeps": 3, "trend_sweeps": 10, "keep_history": 100, "keep_observations": True}
OBSERVATION = {"run_id": "r", "kind": "probe", "source": "p-1", "topic": "__kafka_canary", "partition": 0, "leader": 1,
               "lane": "canary", "producer_id": "p", "message_id": "m-1", "seq": 0, "send_ts": 1_700_000_000_000,
               "ack_ts": 1_700_000_000_005, "receive_ts": 1_700_000_000_009, "outcome": "delivered", "schema": 1}

# What a hand, a template or a bad merge puts into a field: near-misses of the real values, line breaks, numbers
# too large for a float, booleans where numbers go, containers where scalars go.
LINE_BREAKS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029\x00"
SPECIAL = st.sampled_from([
    "30s", "2m", "0s", "-1s", "1e400", "24h", "250ms", " 5 m ", "4.1.2", "3.9.2", "4.1", "latest", "", " ", "v1",
    "orders", "a b", "broker.rack", "listener.name.x.y", "num.io.threads", "x\ny", "1000000\nbroker.rack=x",
    "a\u2028b", 10**400, -(10**400), 2**63, -1, 0, 1, 1.5, True, False, None, [], {}, [1, 1], [0], ["orders"],
    float("nan"), float("inf"), -float("inf")])
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=20),
                    st.text(alphabet=st.sampled_from("a.b1 " + LINE_BREAKS), max_size=8))
JSON_LIKE = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4)
                         | st.dictionaries(st.text(max_size=12), inner, max_size=4), max_leaves=16)
CONFIGS = st.dictionaries(
    st.one_of(st.from_regex(r"[a-z0-9][a-z0-9._-]{0,20}", fullmatch=True), st.text(max_size=12), SPECIAL.filter(
        lambda v: isinstance(v, str))),
    st.one_of(SCALARS, SPECIAL), max_size=5)
VALUES = st.one_of(SPECIAL, JSON_LIKE)


def _paths(doc, prefix=()):
    """Every path into `doc`'s mappings (a path names a key of the mapping at its parent)."""
    if isinstance(doc, dict):
        for key, value in doc.items():
            yield (*prefix, key)
            yield from _paths(value, (*prefix, key))


@st.composite
def near_valid(draw, good: dict) -> dict:
    """`good` with up to three values swapped for nasty ones, maybe other broker config overrides, and maybe a key
    it does not know (with nothing swapped, a valid spec whose config values are arbitrary)."""
    doc = copy.deepcopy(good)
    for _ in range(draw(st.integers(0, 3))):
        paths = list(_paths(doc))
        if not paths:
            break
        *parent, key = draw(st.sampled_from(paths))
        node = doc
        for part in parent:
            node = node[part]
        # a copy: SPECIAL's `{}` is one object for every draw, and setting `change.config` below in a `{}` put at
        # `change` would change it for every later example (hypothesis: FlakyStrategyDefinition)
        node[key] = copy.deepcopy(draw(VALUES))
    if draw(st.booleans()) and isinstance(doc.get("change"), dict) and "config" in good.get("change", {}):
        doc["change"]["config"] = draw(CONFIGS)
    if draw(st.integers(0, 5)) == 0:
        doc[draw(st.text(max_size=8))] = copy.deepcopy(draw(VALUES))
    return doc


def _documents(good: dict):
    return st.one_of(near_valid(good), JSON_LIKE.filter(lambda v: not isinstance(v, str)))


def _one_line_each(spec: BrokerRolloutSpec) -> None:
    for key, value in spec.change.config.items():
        if value is not None:
            line = properties_line(key, value)
            assert line.endswith("\n") and len(line.splitlines()) == 1, (key, value)


KINDS = {"broker": (BROKER, load_spec, SpecError, BrokerRolloutSpec),
         "client": (CLIENT, load_client_spec, SpecError, ClientRolloutSpec),
         "migration": (MIGRATION, load_migration_spec, MigrationSpecError, MigrationSpec)}


def _loaded(kind: str, raw):
    """The spec `raw` makes, or None when the loader refused it with its own error naming the problems."""
    _, load, error, made = KINDS[kind]
    try:
        spec = load(raw)
    except error as exc:
        assert exc.problems and all(isinstance(p, str) and p for p in exc.problems)
        return None
    assert isinstance(spec, made) and json.dumps(spec.to_dict()) and spec.effective_run_id
    if isinstance(spec, BrokerRolloutSpec):
        _one_line_each(spec)
    return spec


@pytest.mark.parametrize("kind", sorted(KINDS))
@FUZZ
@given(data=st.data())
def test_any_document_gives_a_spec_or_the_loaders_error(kind, data):
    _loaded(kind, data.draw(_documents(KINDS[kind][0])))


@FUZZ
@given(data=st.data())
def test_any_judge_config_gives_a_config_or_its_error(data):
    raw = data.draw(_documents(JUDGE))
    try:
        config = config_from_dict(raw)
    except ConfigError as exc:
        assert str(exc).strip() and "\n" not in str(exc)
        return
    assert isinstance(config, JudgeConfig) and config.active
    assert config_from_dict(config.to_dict()) == config  # what the Spark job reads back is the same config


@FUZZ
@given(data=st.data())
def test_any_sweep_settings_give_a_sweep_or_its_error(data):
    raw = data.draw(near_valid(SWEEP))
    try:
        config = SweepConfig(**{str(key): value for key, value in raw.items()})
    except SweepError as exc:
        assert str(exc).strip()
        return
    assert config.cluster and config.judge_config().active


@pytest.mark.parametrize("kind, raw", [
    ("broker", {**BROKER, "change": {"config": {"message.max.bytes": "1000000\nbroker.rack=x:canary-broker"}}}),
    ("broker", {**BROKER, "change": {"config": {"message.max.bytes": "1\x1cbroker.rack=x"}}}),
    ("broker", {**BROKER, "probe": {"window": 10**400}}), ("migration", {**MIGRATION, "window_s": 10**400}),
    ("migration", {0: "x", **MIGRATION}), ("client", {**CLIENT, "service": {**CLIENT["service"], "rate": 1e400}}),
])
def test_edge_documents_are_refused_cleanly(kind, raw):
    assert _loaded(kind, raw) is None


@FUZZ
@given(st.dictionaries(st.from_regex(r"[a-z0-9][a-z0-9._-]{0,20}", fullmatch=True),
                       st.one_of(SCALARS, st.text(max_size=30)), min_size=1, max_size=6))
def test_no_config_value_of_a_valid_spec_adds_a_line(config):
    try:
        spec = load_spec({**BROKER, "change": {"config": config}})
    except SpecError as exc:  # a line break, a trailing backslash or a managed key, nothing else
        assert all(p.startswith("change.config.") for p in exc.problems), exc.problems
        return
    assert set(spec.change.config) == set(config)
    _one_line_each(spec)


@FUZZ
@given(st.one_of(st.text(max_size=200), st.text(alphabet=st.sampled_from("{}[]:,\"'- \n\tab1&*!|>"), max_size=60)))
@example("cluster: &a [*a]")
@example("cluster: !!python/object:os.system {}")
def test_a_spec_file_of_any_text(text):
    fd, path = tempfile.mkstemp(suffix=".yaml")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", errors="surrogatepass") as out:
            out.write(text)
        for load, error in ((load_spec, SpecError), (load_client_spec, SpecError),
                            (load_migration_spec, MigrationSpecError)):
            with contextlib.suppress(error):
                load(path)
    finally:
        os.unlink(path)


@FUZZ
@given(st.one_of(
    st.binary(max_size=300), st.text(max_size=300), JSON_LIKE.map(json.dumps),
    st.dictionaries(st.sampled_from(sorted(OBSERVATION) + ["error", "processing_ms", "lag", "x"]), VALUES,
                    max_size=4).map(lambda fields: json.dumps({**OBSERVATION, **fields}, allow_nan=True))))
@example("[" * 30_000 + "]" * 30_000)
@example(b"\xff\xfe{")
@example(json.dumps(OBSERVATION))
def test_observation_records(raw):
    try:
        observation = Observation.from_json(raw)
    except BadObservation as exc:
        assert exc.reason in ("malformed", "schema_version", "unknown_lane", "unknown_outcome", "oversize")
    else:
        assert isinstance(observation, Observation)
    lines = [raw] if isinstance(raw, bytes) else raw.splitlines() or [raw]
    parsed, bad = read_observations(lines)
    assert len(parsed) + sum(bad.values()) <= len(lines)
