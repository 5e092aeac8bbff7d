"""The statistical gate (docs/design.md): pure Python, fed the Spark job's aggregates.

The pipeline: aggregates (the input and the window), alpha (the budget split), rates and quantiles (the
per-metric lane comparisons), evidence (a metric's result and decision: `MetricResult`, `Decision`), verdict (the
judge itself).
"""

from canary.errors import ConfigError
from canary.judge.aggregates import Aggregates
from canary.judge.brief import INCONCLUSIVE, PROMOTE, ROLLBACK, Brief, VerdictWord, brief, e_values, failed_metrics
from canary.judge.config import DEFAULT_METRICS, JudgeConfig, MetricSpec, load_config
from canary.judge.evidence import Decision, MetricResult
from canary.judge.verdict import VERDICT_SCHEMA_VERSION, judge

__all__ = ["DEFAULT_METRICS", "INCONCLUSIVE", "PROMOTE", "ROLLBACK", "VERDICT_SCHEMA_VERSION", "Aggregates", "Brief",
           "ConfigError", "Decision", "JudgeConfig", "MetricResult", "MetricSpec", "VerdictWord", "brief", "e_values",
           "failed_metrics", "judge", "load_config"]
