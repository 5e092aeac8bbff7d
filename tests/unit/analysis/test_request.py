"""The analysis request: its checks before any work, and its command-line form read back as written."""

from __future__ import annotations

import argparse

import pytest

from canary.analysis import AnalysisRequest, RequestError, parse_time, write_judge_config
from canary.analysis.request import add_arguments
from canary.judge import ConfigError, load_config
from canary.judge.config import config_from_dict


def test_times_are_epoch_ms_or_iso_8601():
    assert parse_time("1700000000000") == parse_time("2023-11-14T22:13:20Z") == 1_700_000_000_000
    assert parse_time(None) is None and parse_time(5) == 5
    with pytest.raises(RequestError, match="--from 'yesterday' is neither epoch milliseconds nor an ISO-8601 time"):
        parse_time("yesterday", "--from")


def test_the_job_arguments_parse_back_into_the_same_request(tmp_path):
    request = AnalysisRequest("kafka://h:9092/obs", tmp_path / "out", from_ms=1000, to_ms=2000, config="j.yaml",
                              run_id="r1", interim=True)
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    assert AnalysisRequest.from_args(parser.parse_args(request.job_args())) == request
    assert AnalysisRequest("x.jsonl", "out").job_args() == ["--observations", "x.jsonl", "--out", "out"]


def test_check_refuses_a_missing_source_an_empty_window_and_a_bad_config(tmp_path):
    with pytest.raises(RequestError, match=r"--observations /nonexistent/obs.jsonl does not exist; give"):
        AnalysisRequest("/nonexistent/obs.jsonl", tmp_path).check()
    with pytest.raises(RequestError, match="--from 2000 is not before --to 1000: the window would be empty"):
        AnalysisRequest("kafka://h:1", tmp_path, from_ms=2000, to_ms=1000).check()
    with pytest.raises(ConfigError, match="cannot read judge config /nonexistent/judge.yaml"):
        AnalysisRequest("kafka://h:1", tmp_path, config="/nonexistent/judge.yaml").check()
    assert AnalysisRequest("kafka://h:1", tmp_path).check().alpha == load_config(None).alpha


def test_the_judge_config_file_reads_back_as_written(tmp_path):
    from canary.demo import FAST_JUDGE

    config = config_from_dict(FAST_JUDGE)
    path = write_judge_config(config, tmp_path / "judge.yaml")  # what a rollout's analysis request names
    assert load_config(path).to_dict() == config.to_dict()
