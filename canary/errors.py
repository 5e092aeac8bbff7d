"""Exceptions of the library. Each message says what went wrong and what to do about it."""

from canary.outcome import Outcome


class CanaryError(Exception):
    """Base class: a problem the user can act on; the CLI prints the message and exits with `exit_code` (2: an
    error that decided nothing, canary.outcome)."""

    exit_code: int = Outcome.ERROR.exit_code


class ConfigError(CanaryError):
    """Settings or a config file that cannot be used as given (client settings, the probe's, the judge's)."""

    # The judge config's errors start with this; a spec's field naming the judge config drops it (the field's name
    # says the same).
    PREFIX = "judge config: "


class SetupError(CanaryError):
    """A prerequisite is missing: Java, Maven, or a Kafka release."""


class ClusterError(CanaryError):
    """A cluster operation cannot be done as asked."""


class InfrastructureError(ClusterError):
    """The tool could not reach or drive what it deploys through (a host ssh cannot reach, a command that is not
    there): no judgment of the change. A rollout that already changed something still rolls back, for safety, and
    ends UNFINISHED (exit 4), not ROLLBACK: a release pipeline tells a bad change from a broken road to it."""


class ClusterStateError(ClusterError):
    """The cluster directory is not in the state the operation needs (already up, not up)."""


class UnknownNodeError(ClusterError):
    """A node id that the cluster does not have."""


class PortInUseError(ClusterError):
    """A port the cluster needs is taken by another process."""


class HealthTimeout(ClusterError):
    """The cluster did not become healthy within the time allowed."""


class FeatureError(ClusterError):
    """Feature levels cannot be read or finalized as asked."""


def one_line(exc: BaseException) -> str:
    """A file's read or parse error as one line: a YAML error as `line L, column C: problem` (PyYAML's own text
    spans several lines with a copy of the input), anything else its first line."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None)
    if mark is not None and problem:
        return f"line {mark.line + 1}, column {mark.column + 1}: {problem}"
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
