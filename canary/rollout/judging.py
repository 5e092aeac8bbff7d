"""The final analysis of a rollout's window, as both kinds run it (canary.analysis): the Spark job on the
observations, or the judge in-process (engine: inline); a failed analysis is INCONCLUSIVE, never PROMOTE."""

from __future__ import annotations

import json
from pathlib import Path

from canary import analysis
from canary.analysis import AnalysisRequest, inline, write_judge_config
from canary.judge import INCONCLUSIVE, brief
from canary.rollout.core import ClusterRun, Verdict

SPARK_TIMEOUT_S = 900


def analysis_request(run: ClusterRun, *, observations: Path, from_ms: int, to_ms: int, source_run_id: str,
                     out: Path, config, before: Path | None = None) -> dict:
    """What the final analysis of a window reads and writes: the arguments of the analysis job (the Airflow DAG
    hands them to SparkSubmitOperator). The job reads the window's observations file, the run's own record of what
    the probe (or the services) saw: never the observations topic, whose writes a canary that refuses them would
    lose, and whose cluster's credentials would land in XCom and on command lines. `before`: the observations the
    latencies are calibrated by (canary.judge.calibration); "" for none, so a templated command line can always pass
    the flag."""
    out.mkdir(parents=True, exist_ok=True)
    return {"observations": str(observations),
            "from_ms": from_ms, "to_ms": to_ms, "run_id": source_run_id, "out": str(out),
            "config": str(write_judge_config(config, out / "judge.yaml")), "before": str(before or "")}


def final_verdict(run: ClusterRun, request: dict, observations: Path, config) -> Verdict:
    """The final analysis by the run's engine: the Spark job, or the judge in-process (engine: inline)."""
    if run.spec.judge.engine == "inline":
        return inline_verdict(observations, Path(request["out"]), config, request.get("before") or None)
    return spark_verdict(request)


def spark_verdict(request: dict) -> Verdict:
    """The Spark job's verdict for `request` (analysis_request): the verdict.json it already wrote (the Airflow
    DAG's Spark task), else the job run now."""
    out = Path(request["out"])
    verdict_file = out / "verdict.json"
    if verdict_file.exists():
        verdict, failure = json.loads(verdict_file.read_text()), None
    else:
        try:
            result = analysis.analyze(AnalysisRequest(**request), timeout=SPARK_TIMEOUT_S, log=out / "spark.log")
            verdict, failure = result.verdict, f"exit {result.exit_code}"
        except Exception as exc:  # it could not start (no spark-submit, the Kafka source not resolvable, …)
            verdict, failure = None, f"{type(exc).__name__}: {exc}"
    if verdict is None:
        # A failed analysis never promotes: a person decides, or the rollout rolls back.
        return Verdict(verdict=INCONCLUSIVE, reason=f"the Spark analysis failed ({failure}); see "
                                                    f"{out / 'spark.log'}", engine="spark")
    return Verdict(**brief(verdict).model_dump(), engine="spark")


def inline_verdict(observations: Path, out: Path, config, before: str | None = None) -> Verdict:
    verdict = inline.judge_file(observations, out, config, before=before)
    return Verdict(**brief(verdict).model_dump(), engine="inline")
