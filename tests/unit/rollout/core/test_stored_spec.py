"""run.json keeps a rollout's spec in the form it has had since schema 1 (stored_specs.json: what earlier versions
wrote). A resumed run compares it with its spec's and a derived run id hashes it, so the spec models may change
shape but this form may not: a run.json written before an upgrade must still open, under the same run id."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from canary.rollout.broker.spec import load_spec
from canary.rollout.client.spec import load_client_spec
from canary.rollout.migration.spec import load_migration_spec

CASES = json.loads((Path(__file__).parent / "stored_specs.json").read_text())
LOADERS = {"broker": load_spec, "client": load_client_spec, "migration": load_migration_spec}
ENVIRON = {"KAFKA_CANARY_CLIENT_SSL_KEY_PASSWORD": "kp"}


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_stored_spec_and_the_derived_run_id_are_as_earlier_versions_wrote_them(case: str):
    written = CASES[case]
    spec = LOADERS[written["kind"]](written["spec"], ENVIRON)
    assert json.loads(json.dumps(spec.to_dict(), default=str)) == written["stored"]  # as RunState stores it
    assert spec.effective_run_id == written["run_id"]
    assert spec.secret_values == written["secrets"]


def test_a_field_added_since_is_stored_only_when_set():
    base = {"cluster": {"dir": "/c"}, "change": {"config": {"num.io.threads": "6"}}, "canary": {"count": 1}}
    plain = load_spec(base)
    assert "promote" not in plain.to_dict() and plain.to_dict()["fault"] == {"client_delay_ms": 0.0}
    batched = load_spec(base | {"promote": {"max_batch": 2}}).to_dict()["promote"]
    assert batched == {"max_batch": 2, "headroom": 0, "bake": 600.0}  # as before waves existed
    waves = load_spec(base | {"promote": {"waves": ["50%", "all"]}, "fault": {"on": "promoted"},
                              "timeouts": {"pause": "2h"}})
    stored = waves.to_dict()
    assert stored["promote"]["waves"] == ["50%", "all"] and stored["fault"]["on"] == "promoted"
    assert stored["pause_timeout"] == 7200.0 and waves.effective_run_id != plain.effective_run_id
