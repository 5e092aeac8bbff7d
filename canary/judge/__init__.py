"""The statistical gate (docs/design.md): pure Python, fed the Spark job's aggregates."""

from canary.judge.config import DEFAULT_METRICS, ConfigError, JudgeConfig, MetricSpec, load_config
from canary.judge.core import (
    INCONCLUSIVE,
    PROMOTE,
    ROLLBACK,
    VERDICT_SCHEMA_VERSION,
    Aggregates,
    judge,
)

EXIT_CODES = {PROMOTE: 0, ROLLBACK: 1, INCONCLUSIVE: 3}

__all__ = ["DEFAULT_METRICS", "EXIT_CODES", "INCONCLUSIVE", "PROMOTE", "ROLLBACK", "VERDICT_SCHEMA_VERSION",
           "Aggregates", "ConfigError", "JudgeConfig", "MetricSpec", "judge", "load_config"]
