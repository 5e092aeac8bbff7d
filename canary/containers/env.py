"""A node's config as container environment, by the official `apache/kafka` image's rule: `KAFKA_` + the key upper
case, `.` → `_`, `_` → `__`, `-` → `___` (`log.flush.interval.messages` → `KAFKA_LOG_FLUSH_INTERVAL_MESSAGES`).
Our images read the same variables, so one container spec drives both."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

PREFIX = "KAFKA_"
# KAFKA_ variables the image reads for the JVM, not server.properties keys (as the official image skips them).
NOT_CONFIG = frozenset({
    "KAFKA_VERSION", "KAFKA_HEAP_OPTS", "KAFKA_OPTS", "KAFKA_JMX_OPTS", "KAFKA_LOG4J_OPTS",
    "KAFKA_JVM_PERFORMANCE_OPTS", "KAFKA_GC_LOG_OPTS", "KAFKA_LOG4J_ROOT_LOGLEVEL", "KAFKA_LOG4J_LOGGERS",
    "KAFKA_TOOLS_LOG4J_LOGLEVEL", "KAFKA_JMX_HOSTNAME", "KAFKA_JMX_PORT", "KAFKA_TOOLS_LOG4J_OPTS",
})


def variable(key: str) -> str:
    """The environment variable of config key `key`."""
    return PREFIX + key.replace("_", "__").replace("-", "___").replace(".", "_").upper()


def key_of(name: str) -> str | None:
    """The config key of environment variable `name`, or None when it is not a config variable."""
    if not name.startswith(PREFIX) or name in NOT_CONFIG:
        return None
    rest = name[len(PREFIX):].replace("___", "-").replace("__", "\0").replace("_", ".").replace("\0", "_")
    return rest.lower()


def parse(environment: Iterable[str]) -> dict[str, str]:
    """`NAME=value` strings (as Docker lists a container's environment) → name → value."""
    return {name: value for name, _, value in (item.partition("=") for item in environment)}


def config_of(environment: Mapping[str, str]) -> dict[str, str]:
    """The config keys and values a container's environment gives its node."""
    return {key: value for name, value in environment.items() if (key := key_of(name)) is not None}


def with_config(environment: Mapping[str, str], config: Mapping[str, str], replaced: Iterable[str]) -> dict[str, str]:
    """`environment` with the config variables of the keys in `replaced` removed, then `config` set."""
    drop = {variable(k) for k in replaced}
    return {n: v for n, v in environment.items() if n not in drop} | {variable(k): v for k, v in config.items()}
