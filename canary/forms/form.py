"""A trigger form: a flat list of fields (FormField), each pointing at a field of a spec model, and what comes of
it (Form: each param's JSON schema, the spec a run's params ask for, the check of every param at once). The
package's docstring tells the whole story; dag_forms.py holds the DAGs' own forms."""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo

from canary.errors import CanaryError
from canary.fields import DURATION_PATTERN, SpecModel, format_duration, problem_items


class FormError(CanaryError):
    """Trigger params that cannot be used; `problems` lists every param to fix."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        listed = " " + problems[0] if len(problems) == 1 else "\n  - " + "\n  - ".join(problems)
        super().__init__("the trigger params are not valid, nothing was started:" + listed)


class _FromModel:
    """A form field's default that is its model field's: Form fills it in."""

    def __repr__(self) -> str:
        return "FROM_MODEL"


FROM_MODEL: Any = _FromModel()


@dataclass(frozen=True)
class FormField:
    name: str                    # the trigger param
    path: tuple[str, ...]        # where its value goes in the spec; () = an option of the DAG (the options model)
    title: str
    description: str
    default: Any = FROM_MODEL    # as the form shows it; given only where the model field has no default
    unless: str | None = None    # left out of the spec when this other param is given
    schema: Mapping[str, Any] | None = None  # replaces the model's where a form takes another shape


def _empty(value: Any) -> bool:
    return value is None or value == "" or value == [] or value == {}


def _names(model: type[BaseModel], part: str) -> tuple[str, str]:
    """The attribute name of the field `part` (its name or alias) and the key its JSON schema uses."""
    for name, info in model.model_fields.items():
        if part in (name, info.alias):
            return name, info.alias or name
    raise KeyError(f"{model.__name__} has no field {part!r}")


def _owner(model: type[BaseModel], path: tuple[str, ...]) -> type[BaseModel]:
    """The model (a section of `model`) that holds the last field of `path`."""
    for part in path[:-1]:
        section = model.model_fields[_names(model, part)[0]].annotation
        assert isinstance(section, type) and issubclass(section, BaseModel), path
        model = section
    return model


@functools.cache
def _properties(model: type[BaseModel]) -> Mapping[str, Any]:
    """The JSON schema of each field of `model`, built once per model (a DAG file builds every form's params)."""
    return MappingProxyType(model.model_json_schema(by_alias=True)["properties"])


def _leaf_schema(model: type[BaseModel], path: tuple[str, ...]) -> dict[str, Any]:
    owner = _owner(model, path)
    return copy.deepcopy(_properties(owner)[_names(owner, path[-1])[1]])


def _form_schema(schema: dict[str, Any], default: Any) -> dict[str, Any]:
    """A model field's schema as a form param's: no title or default of the model's, `X or null` as one type
    that admits null, and no minimum count of items when the form's default is an empty list (empty = not set)."""
    schema = {k: v for k, v in schema.items() if k not in ("title", "default")}
    options = schema.pop("anyOf", None)
    if options:
        real = [o for o in options if o != {"type": "null"}]
        if len(real) == 1 and len(options) == 2:
            schema = {**real[0], **schema, "type": ["null", real[0].get("type")]}
        else:  # the union of the options' types too: a form renders and checks a param by its type
            schema["anyOf"] = options
            schema["type"] = sorted({o["type"] for o in options if isinstance(o.get("type"), str)})
    if default == []:
        schema.pop("minItems", None)
    return schema


@dataclass(frozen=True)
class Form:
    model: type[BaseModel]                 # the spec the paths point into
    options: type[SpecModel]               # the params that are not in the spec
    fields: tuple[FormField, ...]
    placeholders: Mapping[str, Any]        # what the DAG adds at run time (cluster, run id), for `check`

    def __post_init__(self) -> None:
        resolved = tuple(replace(f, default=self.model_default(f.name)) if f.default is FROM_MODEL else f
                         for f in self.fields)
        object.__setattr__(self, "fields", resolved)

    def _where(self, f: FormField) -> tuple[type[BaseModel], tuple[str, ...]]:
        """The model a field's value is validated by, and the path to it there."""
        return (self.model, f.path) if f.path else (self.options, (f.name,))

    def model_field(self, name: str) -> FieldInfo:
        """The model field behind the param `name`."""
        model, path = self._where(self.field(name))
        owner = _owner(model, path)
        return owner.model_fields[_names(owner, path[-1])[0]]

    def model_default(self, name: str) -> Any:
        """The model field's default as the form shows it: a duration as text ("2m", not 120.0), a section as {}.
        Raises ValueError when the model field has none (the form must propose one)."""
        info = self.model_field(name)
        if info.is_required():
            raise ValueError(f"form field {name}: its model field is required; give the form's default")
        value = info.get_default(call_default_factory=True)
        duration = _leaf_schema(*self._where(self.field(name))).get("pattern") == DURATION_PATTERN
        return format_duration(value) if duration and isinstance(value, int | float) else value

    @property
    def names(self) -> frozenset[str]:
        return frozenset(f.name for f in self.fields)

    def field(self, name: str) -> FormField:
        for f in self.fields:
            if f.name == name:
                return f
        raise KeyError(name)

    def json_schema(self, name: str) -> dict[str, Any]:
        f = self.field(name)
        if f.schema is not None:
            return dict(f.schema)
        return _form_schema(_leaf_schema(*self._where(f)), f.default)

    def parse(self, name: str, text: str) -> Any:
        """A param given as text on a command line: JSON where it parses ("ask" quoted too), but a text param
        stays text unless its JSON is a string or null (a version such as 4.1 is not the number 4.1)."""
        try:
            value = json.loads(text)
        except ValueError:
            return text
        kind = self.json_schema(name).get("type")
        if kind in ("string", ["null", "string"]) and not (value is None or isinstance(value, str)):
            return text
        return value

    def _refuse_unknown(self, params: Mapping[str, Any]) -> None:
        known = self.names
        unknown = sorted(set(params) - known)
        if unknown:
            raise FormError([f"{name}: unknown param; known params are {', '.join(sorted(known))}"
                             for name in unknown])

    def spec(self, params: Mapping[str, Any], **fixed: Any) -> dict[str, Any]:
        """The spec mapping for `params` (missing ones take the form's default), with `fixed` at the top level."""
        self._refuse_unknown(params)
        values = {f.name: params.get(f.name, f.default) for f in self.fields}
        doc: dict[str, Any] = {}
        for f in self.fields:
            if not f.path or _empty(values[f.name]) or (f.unless and not _empty(values[f.unless])):
                continue
            node = doc
            for part in f.path[:-1]:
                node = node.setdefault(part, {})
            node[f.path[-1]] = values[f.name]
        return {**doc, **fixed}

    def check(self, params: Mapping[str, Any]) -> None:
        """Raises FormError naming every param that the spec or the options refuse."""
        self._refuse_unknown(params)
        found: list[str] = []
        options = {f.name: params[f.name] for f in self.fields if not f.path and f.name in params}
        for model, data in ((self.options, options), (self.model, self.spec(params, **self.placeholders))):
            try:
                model.model_validate(data)
            except ValidationError as exc:
                found += [f"{self._named(loc)}: {text}" for loc, text in problem_items(exc, model)]
        if found:
            raise FormError(found)

    def _named(self, loc: tuple) -> str:
        """The param(s) a problem at `loc` is about: the field whose path leads there, else those under it."""
        loc = tuple(str(p) for p in loc)
        for f in sorted(self.fields, key=lambda f: -len(f.path)):
            if f.path and loc[:len(f.path)] == f.path:
                return ".".join((f.name, *loc[len(f.path):]))  # a key inside the param's mapping too
        under = [f.name for f in self.fields if f.path and f.path[:len(loc)] == loc]
        return " / ".join(under) or ".".join(loc) or "the params"
