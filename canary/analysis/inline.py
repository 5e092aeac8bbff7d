"""The inline engine: the analysis of one observations file (JSON lines) in this process, without Spark. The same
reading rules as the Spark job (the one reader, canary.observations: unusable records are excluded and counted per
reason in the verdict), the plain-Python aggregation of the judge (Aggregates.from_observations), the judge, and
verdict.json. For a probe window's file, seconds; the rollout's interim looks and `engine: inline` use it."""

from __future__ import annotations

import json
from pathlib import Path

from canary.analysis.errors import RequestError
from canary.analysis.request import AnalysisRequest
from canary.analysis.result import AnalysisResult
from canary.judge import Aggregates, JudgeConfig, judge
from canary.judge.calibration import Calibration
from canary.observations import Record, read_file_counted


def read_window(path: str | Path, *, from_ms: int | None = None, to_ms: int | None = None,
                run_id: str | None = None) -> tuple[list[Record], dict[str, int]]:
    """The usable observations and broker readings of `path` sent (read) in [from_ms, to_ms) by run `run_id` (None:
    any), and the excluded records counted per reason. A missing file has no observations."""
    parsed, bad = read_file_counted(path)
    if from_ms is not None or to_ms is not None or run_id is not None:
        # As the Spark job: observations of other windows and runs belong elsewhere and are left out silently.
        parsed = [o for o in parsed if (from_ms is None or o.send_ts >= from_ms)
                  and (to_ms is None or o.send_ts < to_ms) and (run_id is None or o.run_id == run_id)]
    return parsed, bad


def aggregate(path: str | Path, config: JudgeConfig, **window) -> tuple[Aggregates, int]:
    """The observations file aggregated for the judge (in `config`'s time buckets), and how many observations
    were usable. `window`: read_window's from_ms, to_ms, run_id."""
    parsed, bad = read_window(path, **window)
    return Aggregates.from_observations(parsed, int(config.bucket_s * 1000), bad), len(parsed)


def calibration(before: str | Path | None) -> Calibration | None:
    """The brokers' latencies in an observations file of a run before the change (the preflight probe's), which the
    judge calibrates the window's latency quantiles by; None for no file."""
    return None if before is None else Calibration.from_observations(read_file_counted(before)[0])


def judge_file(path: str | Path, out: Path, config: JudgeConfig, *, final: bool = True,
               before: str | Path | None = None, **window) -> dict:
    """The judge's verdict on the observations file, also written to out/verdict.json; `before`: calibration()."""
    verdict = judge(aggregate(path, config, **window)[0], config, final=final, before=calibration(before))
    out.mkdir(parents=True, exist_ok=True)
    (out / "verdict.json").write_text(json.dumps(verdict, indent=2))
    return verdict


def check_source(request: AnalysisRequest) -> None:
    """Refuses a source only Spark reads: the observations topic, Parquet, a directory."""
    source = request.observations
    if request.from_kafka or source.endswith(".parquet") or Path(source).is_dir():
        raise RequestError(f"the inline engine reads one JSON-lines observations file, not {source}; "
                           f"use the Spark engine for the observations topic, Parquet and directories")


def run_inline(request: AnalysisRequest, config: JudgeConfig) -> AnalysisResult:
    """The analysis of `request` (checked by the caller, `config` its judge config) in this process: verdict.json
    only (the aggregates history and the report are the Spark job's)."""
    if not request.empty:  # an empty file is judged here whatever its kind: there is nothing to read
        check_source(request)
    verdict = judge_file(request.observations, request.out, config, final=not request.interim, before=request.before,
                         from_ms=request.from_ms, to_ms=request.to_ms, run_id=request.run_id)
    return AnalysisResult.judged("inline", request.out, verdict)
