"""Why an analysis could not give a verdict. Each message is one line that says what to do."""

from __future__ import annotations

from canary.errors import CanaryError


class AnalysisError(CanaryError):
    """The analysis could not run or did not finish."""


class RequestError(AnalysisError):
    """The request would be refused by the analysis job: a missing source, a bad window, a source the engine
    cannot read."""


class ConnectorError(AnalysisError):
    """Spark's Kafka source jars cannot be resolved (no Maven, or Maven Central not reachable)."""


class SparkSubmitError(AnalysisError):
    """spark-submit cannot be started (pyspark not installed)."""


class AnalysisTimeout(AnalysisError):
    """The analysis job did not finish within its time limit."""
