"""The inline engine on small observations files with known answers: reading, the window, the verdict file."""

from __future__ import annotations

import json

import pytest
from observation_files import SMALL_JUDGE, START_MS, probe_run, write_lines

from canary.analysis import AnalysisRequest, RequestError, analyze, inline
from canary.judge.config import config_from_dict

CONFIG = config_from_dict(SMALL_JUDGE)


def test_a_good_run_is_promoted_and_a_lossy_canary_rolled_back(tmp_path, judge_yaml):
    good = write_lines(tmp_path / "good.jsonl", probe_run())
    lossy = write_lines(tmp_path / "lossy.jsonl", probe_run(lose_every=10))
    promoted = analyze(AnalysisRequest(good, tmp_path / "good", config=judge_yaml), engine="inline")
    rolled_back = analyze(AnalysisRequest(lossy, tmp_path / "lossy", config=judge_yaml), engine="inline")
    assert (promoted.verdict["verdict"], promoted.exit_code) == ("PROMOTE", 0), promoted.verdict["reason"]
    assert (rolled_back.verdict["verdict"], rolled_back.exit_code) == ("ROLLBACK", 1), rolled_back.verdict["reason"]
    assert json.loads(rolled_back.verdict_file.read_text()) == rolled_back.verdict
    assert rolled_back.engine == "inline" and rolled_back.out == tmp_path / "lossy"


def test_the_window_and_run_select_observations_as_the_spark_job_does(tmp_path):
    path = write_lines(tmp_path / "obs.jsonl", probe_run("run-a") + probe_run("run-b", START_MS + 60_000)
                       + ["not json"])
    everything, bad = inline.read_window(path)
    assert len(everything) == 2400 and bad == {"malformed": 1}
    run_b, _ = inline.read_window(path, run_id="run-b")
    assert {o.run_id for o in run_b} == {"run-b"} and len(run_b) == 1200
    first_10s, _ = inline.read_window(path, from_ms=START_MS, to_ms=START_MS + 10_000)
    assert len(first_10s) == 200 and max(o.send_ts for o in first_10s) < START_MS + 10_000
    agg, usable = inline.aggregate(path, CONFIG, run_id="run-a")
    assert usable == 1200 and agg.run_ids == ["run-a"] and agg.bad == {"malformed": 1}


def test_judge_file_writes_the_verdict_and_a_missing_file_has_no_data(tmp_path):
    verdict = inline.judge_file(tmp_path / "missing.jsonl", tmp_path / "out", CONFIG)
    assert verdict["verdict"] == "INCONCLUSIVE"
    assert json.loads((tmp_path / "out" / "verdict.json").read_text())["reason"] == verdict["reason"]


@pytest.mark.parametrize("source", ["kafka://127.0.0.1:9092", "dir", "obs.parquet"])
def test_the_inline_engine_refuses_what_only_spark_reads(tmp_path, source):
    if not source.startswith("kafka://"):
        (tmp_path / source).mkdir()
        source = str(tmp_path / source)
    with pytest.raises(RequestError, match="the inline engine reads one JSON-lines observations file"):
        analyze(AnalysisRequest(source, tmp_path / "out"), engine="inline")
    assert not (tmp_path / "out").exists()
