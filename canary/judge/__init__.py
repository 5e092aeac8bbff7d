"""The statistical gate (docs/design.md): pure Python, fed the Spark job's aggregates.

The pipeline: aggregates (the input and the window), alpha (the budget split), rates and quantiles (the
per-metric lane comparisons), evidence (a metric's result and decision), verdict (the judge itself).
"""

from canary.judge.aggregates import Aggregates
from canary.judge.config import DEFAULT_METRICS, ConfigError, JudgeConfig, MetricSpec, load_config
from canary.judge.verdict import INCONCLUSIVE, PROMOTE, ROLLBACK, VERDICT_SCHEMA_VERSION, brief, failed_metrics, judge

EXIT_CODES = {PROMOTE: 0, ROLLBACK: 1, INCONCLUSIVE: 3}

__all__ = ["DEFAULT_METRICS", "EXIT_CODES", "INCONCLUSIVE", "PROMOTE", "ROLLBACK", "VERDICT_SCHEMA_VERSION",
           "Aggregates", "ConfigError", "JudgeConfig", "MetricSpec", "brief", "failed_metrics", "judge", "load_config"]
