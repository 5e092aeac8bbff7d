"""The trigger forms come from the spec models: each param's schema is its model field's rule, its default is the
model field's, the defaults make a valid spec, and a bad param is named with every other problem before anything
runs."""

from __future__ import annotations

import re
from typing import Annotated, Any

import pytest
from pydantic import TypeAdapter
from pydantic.fields import FieldInfo

from canary.fields import DURATION_PATTERN
from canary.forms import BROKER_FORM, CLIENT_FORM, SWEEP_FORM, Form, FormError, FormField
from canary.rollout.broker.spec import ProbeSection, load_spec
from canary.rollout.client.spec import load_client_spec
from canary.rollout.core.spec import ENGINES
from canary.sweep import SweepConfig

CLUSTER = {"deployer": "local", "dir": "/tmp/c"}
FORMS = {"broker": BROKER_FORM, "client": CLIENT_FORM, "sweep": SWEEP_FORM}


def test_a_params_schema_is_its_model_fields_rule():
    assert BROKER_FORM.json_schema("window") == {"type": "string", "pattern": DURATION_PATTERN}
    rate = {m.__class__.__name__: m for m in ProbeSection.model_fields["rate"].metadata}
    assert BROKER_FORM.json_schema("probe_rate") == {"type": "number", "minimum": rate["Ge"].ge,
                                                     "maximum": rate["Le"].le}
    assert BROKER_FORM.json_schema("engine")["enum"] == list(ENGINES)
    assert BROKER_FORM.json_schema("target_version")["type"] == ["null", "string"]  # empty: a config-only change
    assert BROKER_FORM.json_schema("canary_brokers")["uniqueItems"] is True
    assert "minItems" not in BROKER_FORM.json_schema("canary_brokers")  # [] means "use the count"
    assert CLIENT_FORM.json_schema("fleet_dir") == {"type": "string", "minLength": 1}
    assert SWEEP_FORM.json_schema("reference_sweeps") == {"type": "integer", "minimum": 1, "maximum": 200}
    assert BROKER_FORM.json_schema("on_inconclusive")["enum"] == ["ask", "rollback"]


def _taken(info: FieldInfo, value: Any) -> Any:
    """`value` as the model field takes it: its type, range and parsing ("2m" -> 120.0, {} -> the section)."""
    kind = Annotated[info.annotation, *info.metadata] if info.metadata else info.annotation
    return TypeAdapter(kind).validate_python(value)


@pytest.mark.parametrize(("form", "name"), [(kind, f.name) for kind, form in FORMS.items() for f in form.fields])
def test_every_params_default_is_its_model_fields(form: str, name: str):
    info = FORMS[form].model_field(name)
    shown = FORMS[form].field(name).default
    model_default = None if info.is_required() else info.get_default(call_default_factory=True)
    if model_default is None:  # nothing to show: the form proposes a value the field takes, or leaves it unset
        assert shown in ("", [], {}) or _taken(info, shown) is not None, shown
    else:
        assert shown == model_default or _taken(info, shown) == _taken(info, model_default), (shown, model_default)
    if FORMS[form].json_schema(name).get("pattern") == DURATION_PATTERN:  # as a person writes it, not seconds
        assert isinstance(shown, str) and re.fullmatch(r"\d+(\.\d+)?[smh]", shown), shown


def test_a_duration_is_shown_in_its_largest_whole_unit_and_a_required_field_needs_the_forms_default():
    assert [BROKER_FORM.field(n).default for n in ("window", "interim_interval", "warm_up_timeout")] == [
        "2m", "30s", "5m"]
    assert (CLIENT_FORM.field("window").default, SWEEP_FORM.field("duration").default) == ("1m", "30s")
    with pytest.raises(ValueError, match="service_name: its model field is required"):
        Form(CLIENT_FORM.model, CLIENT_FORM.options, (FormField("service_name", ("service", "name"), "S", "…"),), {})


def test_the_defaults_make_valid_specs():
    BROKER_FORM.check({})
    spec = load_spec(BROKER_FORM.spec({}, cluster=CLUSTER, run_id="r1"))
    assert spec == load_spec({"cluster": CLUSTER, "change": {"version": BROKER_FORM.field("target_version").default},
                              "canary": {"count": 1}, "run_id": "r1"})  # the rest: the model's defaults
    CLIENT_FORM.check({"fleet_dir": "/tmp/fleet"})
    client = load_client_spec(CLIENT_FORM.spec({"fleet_dir": "/tmp/fleet"}, cluster=CLUSTER, run_id="c1"))
    assert (client.change.from_, client.change.to, client.window.duration) == ("v1", "v2", 60.0)
    SWEEP_FORM.check({})
    sweep = SweepConfig(**SWEEP_FORM.spec({}, bootstrap_servers="b:9092"))
    assert (sweep.duration, sweep.rate, sweep.reference_sweeps) == (30.0, 20, 6)


def test_the_client_form_names_a_service_of_the_teams_own():
    params = {"fleet_dir": "/tmp/fleet", "producers": 0, "service_command": {"consumer": ["./billing-{version}"]},
              "service_env": {"JAVA_OPTS": "-Xmx256m"}, "service_cwd": "/srv/billing"}
    CLIENT_FORM.check(params)
    service = load_client_spec(CLIENT_FORM.spec(params, cluster=CLUSTER, run_id="c2")).service
    assert (service.command, service.env, service.cwd) == (
        {"consumer": ["./billing-{version}"]}, {"JAVA_OPTS": "-Xmx256m"}, "/srv/billing")
    assert load_client_spec(CLIENT_FORM.spec({"fleet_dir": "/tmp/fleet"}, cluster=CLUSTER, run_id="c3")
                            ).service.command == {}  # empty: the sample services


def test_empty_means_not_set_and_broker_ids_win_over_the_count():
    spec = BROKER_FORM.spec({"canary_brokers": [3, 4], "target_version": None, "config_overrides": {"a.b": "1"},
                             "window": ""}, cluster=CLUSTER)
    assert spec["canary"] == {"brokers": [3, 4], "control": "auto"} and "version" not in spec["change"]
    assert "window" not in spec["probe"]  # the model's default applies


def test_every_problem_is_named_by_its_param():
    with pytest.raises(FormError) as refused:
        BROKER_FORM.check({"canary_count": 0, "window": "30s", "interim_interval": "1m", "on_inconclusive": "maybe",
                           "config_overrides": {"broker.rack": "x:canary-broker", "num.io.threads": "6\n"}})
    named = sorted(p.split(":")[0] for p in refused.value.problems)
    assert named == ["canary_count", "config_overrides.broker.rack", "config_overrides.num.io.threads",
                     "on_inconclusive", "window / interim_interval / probe_rate / preflight_probe / calibration_probe"]
    with pytest.raises(FormError, match="service_name: '-x' must be"):
        CLIENT_FORM.check({"fleet_dir": "/f", "service_name": "-x"})
    with pytest.raises(FormError, match=r"clusters: \['a'\] are listed twice"):
        SWEEP_FORM.check({"clusters": ["a", "a"]})


def test_an_unknown_param_is_refused_naming_the_known_ones():
    for form in (BROKER_FORM, CLIENT_FORM, SWEEP_FORM):
        with pytest.raises(FormError, match="windw: unknown param; known params are .*duration|window"):
            form.spec({"windw": "1m"})


def test_a_command_line_value_is_json_except_for_a_text_param():
    assert BROKER_FORM.parse("probe_rate", "50") == 50
    assert BROKER_FORM.parse("judge_config", '{"alpha": 0.05}') == {"alpha": 0.05}
    assert BROKER_FORM.parse("target_version", "4.1") == "4.1"  # not the number 4.1
    assert BROKER_FORM.parse("window", "90") == "90"
    assert BROKER_FORM.parse("on_inconclusive", '"ask"') == BROKER_FORM.parse("on_inconclusive", "ask") == "ask"


def test_the_load_param_takes_a_rate_or_auto_as_the_spec_does():
    assert BROKER_FORM.json_schema("load_rate")["type"] == ["number", "string"]
    BROKER_FORM.check({"load_rate": "auto"})
    BROKER_FORM.check({"load_rate": 2000})
    with pytest.raises(FormError, match="load_rate: 'fast' must be records/s per partition"):
        BROKER_FORM.check({"load_rate": "fast"})


def test_the_promotion_params_take_waves_as_the_spec_does():
    spec = BROKER_FORM.spec({"promote_waves": ["10%", "50%", "all"], "promote_max_batch": 2, "promote_look": "30s"},
                            cluster=CLUSTER)
    assert spec["promote"] == {"waves": ["10%", "50%", "all"], "max_batch": 2, "look": "30s", "bake": "10m"}
    assert BROKER_FORM.spec({}, cluster=CLUSTER)["promote"]["waves"] == "auto"
    assert BROKER_FORM.parse("promote_waves", '["50%", "all"]') == ["50%", "all"]
    with pytest.raises(FormError, match="promote_waves: each wave must be a larger share"):
        BROKER_FORM.check({"promote_waves": ["50%", "25%"]})
