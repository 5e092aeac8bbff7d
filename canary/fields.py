"""Typed fields every spec model shares, and the model base that reports every problem at once.

A rule is written once here — what a duration, a Kafka version, a broker id, a broker config key or value, a run id,
a topic name and a set of client settings may be — and used by every spec (broker, client and migration rollouts,
the sweep, the judge config, the Airflow connection's extras) and by the trigger forms generated from their JSON
schema. `SpecModel` refuses unknown fields; `problems(error)` turns pydantic's ValidationError into one line per
problem, each naming the field (`probe.window: …`) and what to fix, never echoing a secret.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import PurePath
from typing import Annotated, Any, ClassVar, get_args, get_origin

from annotated_types import GroupedMetadata
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    WithJsonSchema,
)

from canary.errors import ConfigError
from canary.files import MAX_SHOWN, shown
from canary.kafka import broker_config
from canary.kafka.secrets import is_secret, refuse_credentials
from canary.kafka.versions import BASELINE_VERSION, TARGET_VERSION, VERSION_PATTERN, parse_version

DURATION_PATTERN = r"^\s*\d+(\.\d+)?\s*(ms|s|m|h)?\s*$"
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$"      # run ids, service and group names
TOPIC_PATTERN = r"^[A-Za-z0-9._-]{1,249}$"
_DURATION = re.compile(DURATION_PATTERN)
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: str | float | int | None) -> float | None:
    """'60s', '5m', '1h', '250ms', '90' (seconds) -> seconds; None/'' -> None (run until stopped)."""
    if text is None or text == "":
        return None
    if isinstance(text, bool):
        raise ConfigError(f"duration {text!r} is not like 60s, 5m, 1h or 250ms")
    if isinstance(text, int | float):
        try:
            return float(text)
        except OverflowError:  # an int beyond any float
            raise ConfigError("a duration of more seconds than any float holds; use 60s, 5m, 1h or 250ms") from None
    match = _DURATION.match(text) if isinstance(text, str) else None
    if not match:
        raise ConfigError(f"duration {text!r} is not like 60s, 5m, 1h or 250ms")
    number = re.match(r"\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?", text)
    assert number is not None  # the pattern above matched
    return float(number[1]) * _UNITS[number[2] or "s"]


def format_duration(seconds: float) -> str:
    """Seconds as a person writes them, in the largest whole unit: 120 -> '2m', 30 -> '30s', 1.5 -> '1.5s'."""
    for unit in ("h", "m"):
        if seconds >= _UNITS[unit] and seconds % _UNITS[unit] == 0:
            return f"{seconds / _UNITS[unit]:g}{unit}"
    return f"{seconds:g}s"


def format_utc(ms: float) -> str:
    """Milliseconds since the epoch as a person reads them: ISO 8601, UTC, whole seconds ('2026-11-27T08:16:07Z')."""
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


@dataclass(frozen=True)
class Duration(GroupedMetadata):
    """Seconds given as '30s', '2m', '1h', '250ms' or a number of seconds, between low and high:
    `window: Annotated[float, Duration(10, 24 * 3600)] = 120.0`."""

    low: float
    high: float
    example: str = "30s or 2m"

    def seconds(self, value: object) -> float:
        try:
            parsed = parse_duration(value)  # type: ignore[arg-type]
        except ConfigError:
            parsed = None
        if parsed is None or not self.low <= parsed <= self.high:
            raise ValueError(f"{shown(value)} must be a duration between {format_duration(self.low)} and "
                             f"{format_duration(self.high)}, such as {self.example}")
        return parsed

    def __iter__(self) -> Iterator[object]:
        yield BeforeValidator(self.seconds)
        yield WithJsonSchema({"type": "string", "pattern": DURATION_PATTERN})


def _version(value: object) -> str:
    try:
        return ".".join(map(str, parse_version(str(value))))
    except Exception as exc:  # SetupError: the version rule's own words
        raise ValueError(str(exc)) from None


KafkaVersion = Annotated[str, BeforeValidator(_version),
                         WithJsonSchema({"type": "string", "pattern": VERSION_PATTERN,
                                         "examples": [BASELINE_VERSION, TARGET_VERSION]})]
MAX_BROKER_ID = 2**31 - 1  # Kafka's node ids are non-negative int32


def _broker_id(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_BROKER_ID:
        raise ValueError(f"{shown(value, 60)} is not a broker id: a whole number from 0 to {MAX_BROKER_ID}")
    return value


BrokerId = Annotated[int, BeforeValidator(_broker_id),
                     WithJsonSchema({"type": "integer", "minimum": 0, "maximum": MAX_BROKER_ID})]


@dataclass(frozen=True)
class Matching(GroupedMetadata):
    """A string that matches `pattern`; the error says `what` it must be: `Annotated[str, Matching(p, what)]`."""

    pattern: str
    what: str

    def check(self, value: str) -> str:
        if not re.match(self.pattern, value):
            raise ValueError(f"{shown(value, 100)} must be {self.what}")
        return value

    def __iter__(self) -> Iterator[object]:
        yield AfterValidator(self.check)
        yield WithJsonSchema({"type": "string", "pattern": self.pattern})


Name = Annotated[str, Matching(NAME_PATTERN, "1-100 letters, digits, '.', '_' or '-', starting with a letter or digit")]
RunId = Name
TopicName = Annotated[str, Matching(TOPIC_PATTERN, "a topic name: 1-249 letters, digits, '.', '_' or '-'")]


def _one_line_value(value: object) -> str | None:
    if value is None:
        return None
    if isinstance(value, dict | list):
        raise ValueError(f"must be a single value or null, got {type(value).__name__}")
    text = str(value).lower() if isinstance(value, bool) else str(value)
    if problem := broker_config.value_problem(text):
        raise ValueError(problem)
    return text


def _config_key(key: str) -> str:
    if problem := broker_config.key_problem(key):
        raise ValueError(problem)
    return key


ConfigKey = Annotated[str, AfterValidator(_config_key)]
# A broker config override's value: one line, or null to remove the override.
ConfigValue = Annotated[str | None, BeforeValidator(_one_line_value),
                        WithJsonSchema({"type": ["string", "number", "boolean", "null"]})]


def _client_settings(value: object) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise ValueError("must be a mapping of librdkafka settings, e.g. {security.protocol: SASL_SSL}")
    nested = sorted(k for k, v in value.items() if isinstance(v, dict | list))
    if nested:
        raise ValueError(f"settings {nested} must be single values (strings, numbers or booleans)")
    return {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in value.items()}


# librdkafka settings (security) for every client the product starts; booleans become 'true'/'false'.
ClientSettings = Annotated[dict[str, str], BeforeValidator(_client_settings)]
# Where files go: a directory (a Path is taken as its text) or a storage URL, s3://bucket/prefix (canary.storage).
def _storage_location(value: str) -> str:
    if "://" in value:  # a plain path is no URL: an @ in it is a file name's
        refuse_credentials(value, "give an object store's credentials as AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY "
                                  "(or ~/.aws/credentials)")
    return value


Location = Annotated[str, BeforeValidator(lambda v: str(v) if isinstance(v, PurePath) else v),
                     AfterValidator(_storage_location)]


class SpecModel(BaseModel):
    """The base of every spec model: unknown fields refused, values never changed after validation."""

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)


class BuiltSpec(SpecModel):
    """A spec model code builds with keywords (`SweepConfig(bootstrap_servers=...)`): a bad field raises the
    model's own `error` with every problem, one line each, as loading a file does."""

    error: ClassVar[type[Exception]]  # built with the list of problems

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise self.error(problems(exc, type(self))) from None


@dataclass(frozen=True)
class _Required(GroupedMetadata):
    what: str

    def check(self, value: str) -> str:
        if not value.strip():
            raise ValueError(f"is required: {self.what}")
        return value

    def __iter__(self) -> Iterator[object]:
        yield AfterValidator(self.check)
        yield Field(json_schema_extra={"minLength": 1})  # a form refuses it empty too


def required(what: str) -> _Required:
    """A string that may not be blank; the error says what it is: `Annotated[str, required("...")] = ""`."""
    return _Required(what)


def _known_fields(model: type[BaseModel], loc: tuple) -> list[str]:
    """The field names a model has at `loc` (the parent of an unknown field), for the error message."""
    parts = iter(loc)
    for part in parts:
        field = model.model_fields.get(str(part)) if isinstance(part, str) else None
        annotation = field.annotation if field else None
        if get_origin(annotation) is dict:  # models by name: the next part is the name
            annotation = get_args(annotation)[1]
            if next(parts, None) is None:
                return []
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            return []
        model = annotation
    return sorted(f.alias or name for name, f in model.model_fields.items())


def _shown(part: object) -> str:
    """A field name as a problem line shows it: quoted when it holds anything but a plain name (a line break in a
    key must not break the line)."""
    text = str(part)
    return text if re.fullmatch(r"[\w.-]{1,100}", text) else shown(text, 100)


def problem_items(error: ValidationError, model: type[BaseModel]) -> list[tuple[tuple, str]]:
    """(where, what is wrong and what to fix) per problem of `error`; `where` is the field's path."""
    items = []
    for item in error.errors(include_url=False):
        loc = tuple(p for p in item["loc"] if p != "[key]")
        kind, text = item["type"], item["msg"]
        if kind == "extra_forbidden":
            known = _known_fields(model, tuple(item["loc"])[:-1])
            text = "unknown field" + (f"; known fields are {', '.join(known)}" if known else "")
        elif kind == "missing":
            text = "is required"
        elif kind == "value_error":
            text = text.removeprefix("Value error, ")
        elif not any(isinstance(p, str) and is_secret(p) for p in loc):
            text = f"{text} (got {shown(item.get('input'), 60)})"
        items.append((loc, text if len(text) <= 2 * MAX_SHOWN else text[:2 * MAX_SHOWN - 1] + "…"))
    return items


MAX_PROBLEMS = 20  # listed in one error; a file of thousands of bad fields gets a bounded message


def problems(error: ValidationError, model: type[BaseModel]) -> list[str]:
    """One line per problem of `error` (at most MAX_PROBLEMS, then how many more): the field's dotted path, what
    is wrong and what to fix."""
    lines = [f"{'.'.join(_shown(p) for p in loc) or 'the spec'}: {text}" for loc, text in problem_items(error, model)]
    more = len(lines) - MAX_PROBLEMS
    return lines[:MAX_PROBLEMS] + [f"… and {more} more problem(s)"] if more > 0 else lines
