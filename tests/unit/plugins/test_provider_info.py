"""The provider info Airflow reads through the entry point: valid for the pinned Airflow's schemas, naming classes
and modules that exist, and a connection form whose fields are the extras the hook reads."""

from __future__ import annotations

import importlib
import json
import tomllib
from pathlib import Path

import airflow
import jsonschema
import pytest
from kafka_canary_provider.get_provider_info import get_provider_info
from kafka_canary_provider.hooks.kafka_canary import KafkaCanaryHook

from canary.rollout.core.spec import DEPLOYERS

REPO = Path(__file__).resolve().parents[3]
SCHEMAS = Path(airflow.__file__).parent
INFO = get_provider_info()
(CONNECTION,) = INFO["connection-types"]
FIELDS = CONNECTION["conn-fields"]


def _schema(name: str) -> dict:
    return json.loads((SCHEMAS / name).read_text())


def test_valid_for_airflows_runtime_schema_and_its_stricter_connection_form_schema():
    jsonschema.validate(INFO, _schema("provider_info.schema.json"))
    # provider.yaml's schema is the one that spells out conn-fields and ui-field-behaviour.
    provider_yaml = _schema("provider.yaml.schema.json")
    jsonschema.validate(INFO["connection-types"], provider_yaml["properties"]["connection-types"])
    behaviour = CONNECTION["ui-field-behaviour"]
    jsonschema.validate({"hidden_fields": behaviour["hidden-fields"], "relabeling": behaviour["relabeling"],
                         "placeholders": behaviour["placeholders"]},
                        _schema("customized_form_field_behaviours.schema.json"))


def test_the_entry_points_name_this_function_and_the_plugin():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert INFO["package-name"] == project["name"]
    points = project["entry-points"]
    module, _, name = points["apache_airflow_provider"]["provider_info"].partition(":")
    assert getattr(importlib.import_module(module), name) is get_provider_info
    module, _, name = points["airflow.plugins"]["kafka_canary"].partition(":")
    plugin = getattr(importlib.import_module(module), name)
    assert plugin.name == "kafka_canary" and plugin.fastapi_apps and plugin.external_views


def test_every_listed_module_and_class_imports():
    for section in ("operators", "hooks", "triggers"):
        for item in INFO[section]:
            for module in item["python-modules"]:
                importlib.import_module(module)
    for dotted in [CONNECTION["hook-class-name"], *INFO["extra-links"]]:
        module, _, name = dotted.rpartition(".")
        assert getattr(importlib.import_module(module), name)


def test_the_connection_type_is_the_hooks():
    module, _, name = CONNECTION["hook-class-name"].rpartition(".")
    assert getattr(importlib.import_module(module), name) is KafkaCanaryHook
    assert (CONNECTION["connection-type"], CONNECTION["hook-name"]) == (KafkaCanaryHook.conn_type,
                                                                       KafkaCanaryHook.hook_name)
    assert "password" in CONNECTION["ui-field-behaviour"]["relabeling"]
    assert FIELDS["deployer"]["schema"]["enum"] == list(DEPLOYERS)


@pytest.mark.parametrize("client", [None, {"security.protocol": "PLAINTEXT", "request.timeout.ms": 30000}])
def test_what_the_form_saves_is_what_the_hook_reads(monkeypatch, client):
    # The UI writes each conn-field to the extra key of its name; an empty nullable field becomes null.
    extra = {"deployer": FIELDS["deployer"]["schema"]["default"], "dir": "/srv/kafka", "client": client,
             "bootstrap_servers": None, "docker": None, "command": None}
    assert set(extra) == set(FIELDS)
    monkeypatch.setenv("AIRFLOW_CONN_FROM_FORM", json.dumps({"conn_type": "kafka_canary", "extra": extra}))
    section = KafkaCanaryHook("from_form").cluster_section()
    assert section["deployer"] == "local" and section["dir"] == "/srv/kafka"
    assert section["client"] == ({} if client is None else {"security.protocol": "PLAINTEXT",
                                                           "request.timeout.ms": "30000"})
