"""The canary analysis as a library call: observations -> aggregates per lane × metric × time bucket -> the
judge's verdict, written to a directory.

    result = analyze(AnalysisRequest("observations.jsonl", "out/"), engine="inline")
    Brief.of(result.verdict).verdict, result.exit_code   # 'PROMOTE', 0  (Brief: canary.judge)

Two engines: `spark` (the analysis job run with spark-submit: any source, the observations topic included, and
the aggregates history and report besides the verdict) and `inline` (one JSON-lines file judged in this process,
seconds, no Spark). `kafka-canary analyze` is a thin caller of `analyze`.
"""

from __future__ import annotations

from pathlib import Path

from canary.analysis.errors import (
    AnalysisError,
    AnalysisTimeout,
    ConnectorError,
    RequestError,
    SparkSubmitError,
)
from canary.analysis.inline import run_inline
from canary.analysis.request import AnalysisRequest, parse_time, write_judge_config
from canary.analysis.result import AnalysisResult
from canary.analysis.submit import DEFAULT_MASTER, check_master, run_spark

ENGINES = ("spark", "inline")


def analyze(request: AnalysisRequest, *, engine: str = "spark", master: str | None = None,
            timeout: float | None = None, log: Path | None = None) -> AnalysisResult:
    """The analysis of `request` with `engine`; the result holds the verdict (also in out/verdict.json) and its
    exit code, or exit 2 and no verdict when the Spark job failed. `master`: the Spark master (default local[2]);
    `timeout`: seconds the Spark job may take; `log`: a file for spark-submit's output (default: this process's).

    Raises RequestError before any work for a request the job would refuse (missing source, empty window, a
    source the engine cannot read), judge ConfigError for a bad judge config, SparkSubmitError / ConnectorError
    when Spark cannot start, AnalysisTimeout when it does not finish in time."""
    if engine not in ENGINES:
        raise RequestError(f"engine {engine!r} is not one of {list(ENGINES)}")
    if engine == "spark":
        check_master(master or DEFAULT_MASTER)  # before any work: a typo must not read as a verdict
    config = request.check()
    if engine == "inline" or request.empty:  # an empty file: INCONCLUSIVE in milliseconds, not a 12 s Spark job
        return run_inline(request, config)
    return run_spark(request, master=master or DEFAULT_MASTER, timeout=timeout, log=log)


__all__ = ["ENGINES", "AnalysisError", "AnalysisRequest", "AnalysisResult", "AnalysisTimeout", "ConnectorError",
           "RequestError", "SparkSubmitError", "analyze", "parse_time", "write_judge_config"]
