"""The DAGs' trigger forms, generated from the spec models, so each rule is written once.

A form is a flat list of fields (the Airflow trigger params), each pointing at a field of a spec model (`path`) or
at an option the DAG reads itself (`path=()`, validated by the form's small `options` model). A field's default is
its model field's, as the form shows it (a duration as "2m", not 120.0); only where the model has none (a required
field, or None meaning "not given") does the form propose one. From it come:
- `json_schema(name)`: the param's JSON schema, the model field's own (type, range, pattern, enum), which the
  provider turns into an Airflow `Param` (kafka_canary_provider.forms);
- `spec(params, ...)`: the nested spec mapping a run's params ask for (an empty value means "not set": a form
  cannot send null for every type), unknown params refused;
- `check(params)`: every problem at once, each naming the param, before anything runs — the release command
  calls it before it asks Airflow for a run.

Modules: `form` (FormField, Form, FormError: the machinery), `dag_forms` (BROKER_FORM, CLIENT_FORM, SWEEP_FORM
and the options models of the params the DAGs read themselves).
"""

from canary.forms.dag_forms import (
    BROKER_FORM,
    CLIENT_FORM,
    CONN_ID_PATTERN,
    SWEEP_FORM,
    ConnectionId,
    RolloutOptions,
    SweepOptions,
)
from canary.forms.form import FROM_MODEL, Form, FormError, FormField

__all__ = ["BROKER_FORM", "CLIENT_FORM", "CONN_ID_PATTERN", "FROM_MODEL", "SWEEP_FORM", "ConnectionId", "Form",
           "FormError", "FormField", "RolloutOptions", "SweepOptions"]
