"""The final analysis of a rollout's window, as both kinds run it: the Spark job on the observations, or the
judge in-process (engine: inline); a failed analysis is INCONCLUSIVE, never PROMOTE."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from canary.judge import INCONCLUSIVE, Aggregates, judge
from canary.observations import read_file_counted
from canary.rollout.core import ClusterRun


def aggregates(path: Path, config) -> tuple[Aggregates, int]:
    """A probe's observations file aggregated for the judge, and how many observations were usable; unusable
    records are excluded and counted per reason in the verdict, as the Spark job does (the one reader, shared
    with the health sweep)."""
    parsed, bad = read_file_counted(path)
    return Aggregates.from_observations(parsed, int(config.bucket_s * 1000), bad), len(parsed)


def write_judge_config(config, path: Path) -> Path:
    """The judge config as the Spark job reads it back: YAML (YAML 1.1 would read JSON's 1e-07 as a string)."""
    path.write_text(yaml.safe_dump(config.to_dict(), sort_keys=False))
    return path


def analysis_request(run: ClusterRun, *, observations: Path, from_ms: int, to_ms: int, source_run_id: str,
                     out: Path, config) -> dict:
    """What the final analysis of a window reads and writes: the arguments of the analysis job (the Airflow DAG
    hands them to SparkSubmitOperator). A secured cluster's credentials are not handed to Spark (its arguments land
    in XCom and on command lines): the job then reads the window's observations file instead, the same records the
    probe or the service wrote to the observations topic."""
    out.mkdir(parents=True, exist_ok=True)
    secured = run.spec.client.get("security.protocol", "plaintext").lower() != "plaintext"
    return {"observations": str(observations) if secured else f"kafka://{run.bootstrap_servers}",
            "from_ms": from_ms, "to_ms": to_ms, "run_id": source_run_id, "out": str(out),
            "config": str(write_judge_config(config, out / "judge.yaml"))}


def final_verdict(run: ClusterRun, request: dict, observations: Path, config) -> dict:
    """The final analysis by the run's engine: the Spark job, or the judge in-process (engine: inline)."""
    if run.spec.engine == "inline":
        return inline_verdict(observations, Path(request["out"]), config)
    return spark_verdict(request)


def spark_verdict(request: dict) -> dict:
    """The Spark job's verdict for `request` (analysis_request): the verdict.json it already wrote, else the job
    run now."""
    from canary.judge.cli import run_analysis

    out = Path(request["out"])
    verdict_file = out / "verdict.json"
    code, failure = None, None
    if not verdict_file.exists():
        try:
            with open(out / "spark.log", "w") as spark_log:
                code = run_analysis(request["observations"], out, from_ms=request["from_ms"], to_ms=request["to_ms"],
                                    config=request["config"], run_id=request["run_id"], timeout=900, log=spark_log)
        except Exception as exc:  # it could not start (no spark-submit, the Kafka source not resolvable, …)
            failure = f"{type(exc).__name__}: {exc}"
    if failure or code == 2 or not verdict_file.exists():
        # A failed analysis never promotes: a person decides, or the rollout rolls back.
        return {"verdict": INCONCLUSIVE, "reason": f"the Spark analysis failed ({failure or f'exit {code}'}); see "
                                                   f"{out / 'spark.log'}", "engine": "spark"}
    verdict = json.loads(verdict_file.read_text())
    return {"verdict": verdict["verdict"], "reason": verdict["reason"], "engine": "spark"}


def inline_verdict(observations: Path, out: Path, config) -> dict:
    verdict = judge(aggregates(observations, config)[0], config, final=True)
    out.mkdir(parents=True, exist_ok=True)
    (out / "verdict.json").write_text(json.dumps(verdict, indent=2))
    return {"verdict": verdict["verdict"], "reason": verdict["reason"], "engine": "inline"}
