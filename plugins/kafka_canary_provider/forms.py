"""The trigger form of a DAG as Airflow Params, generated from the library's form (canary.forms): each param's
type, range, pattern and choices are the spec model's, so the form refuses what the rollout would."""

from __future__ import annotations

from airflow.sdk import Param

from canary.forms import Form


def params_from_form(form: Form) -> dict[str, Param]:
    return {f.name: Param(f.default, title=f.title, description=f.description, **form.json_schema(f.name))
            for f in form.fields}
