"""The rule for broker config overrides, wherever they come from (the CLI's --config, a rollout spec's
change.config, a deployer writing server.properties): a key is a Kafka config name (lower-case letters, digits,
dots, dashes, underscores), and a value is one line. A line break in a value would write a second `key=value` line
into server.properties — any setting at all, the managed ones such as broker.rack included — so it is refused, never
escaped. So is a value ending in a backslash: Java's Properties reads it as a line continuation and joins the next
`key=value` line to it, so the next override would be lost (the broker would run without it, and say nothing)."""

from __future__ import annotations

import re
from collections.abc import Mapping

CONFIG_KEY = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
# every character str.splitlines() breaks at (Java's Properties only at \r and \n, other readers elsewhere), and NUL
_LINE_BREAK = re.compile(r"[\r\n\x00\x0b\x0c\x1c-\x1e\x85\u2028\u2029]")


def key_problem(key: object) -> str | None:
    """What is wrong with `key` as a broker config name (None: nothing)."""
    if not isinstance(key, str) or not CONFIG_KEY.match(key):
        return f"{key!r} is not a broker config name such as num.io.threads"
    return None


def value_problem(value: object) -> str | None:
    """What is wrong with `value` as a broker config value (None: nothing; None itself removes an override)."""
    if isinstance(value, str) and _LINE_BREAK.search(value):
        return "a value must be one line (it contains a line break)"
    if isinstance(value, str) and value.endswith("\\"):
        return ("a value must not end in a backslash (a trailing backslash joins the next line of server.properties "
                "to it, so the next override would be lost)")
    return None


def config_problems(config: Mapping[str, object]) -> list[str]:
    """Every problem of `config` (key -> value or None), each naming its key."""
    problems = []
    for key, value in config.items():
        problem = key_problem(key) or value_problem(value)
        if problem:
            problems.append(f"{key!r}: {problem}" if problem.startswith("a value") else problem)
    return problems


def properties_line(key: str, value: str) -> str:
    """One `key=value` line of a properties file; raises ValueError for a key or value the rule refuses (the last
    guard: whatever path a config took, it cannot add a line)."""
    problem = (key_problem(key) if "\n" in key or "\r" in key else None) or value_problem(value)
    if problem:
        raise ValueError(f"config {key!r}: {problem}")
    return f"{key}={value}\n"
