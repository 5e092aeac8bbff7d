"""`kafka-canary analyze`: the verdict as the exit code, and errors as one line and exit 2."""

from __future__ import annotations

import json

import pytest
from observation_files import probe_run, write_lines

from canary import cli


@pytest.mark.parametrize(("lose_every", "verdict", "code"), [(None, "PROMOTE", 0), (10, "ROLLBACK", 1)])
def test_the_inline_engine_exits_with_the_verdict(tmp_path, judge_yaml, capsys, lose_every, verdict, code):
    path = write_lines(tmp_path / "obs.jsonl", probe_run(lose_every=lose_every))
    out = tmp_path / "out"
    assert cli.main(["analyze", "--engine", "inline", "--observations", str(path), "--out", str(out),
                     "--config", str(judge_yaml), "--run-id", "run-a"]) == code
    assert json.loads((out / "verdict.json").read_text())["verdict"] == verdict
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].startswith(f"{verdict} (score ") and printed[1] == f"wrote {out / 'verdict.json'}"


def test_an_empty_run_is_inconclusive_exit_3(tmp_path, judge_yaml):
    path = write_lines(tmp_path / "obs.jsonl", probe_run())
    assert cli.main(["analyze", "--engine", "inline", "--observations", str(path), "--out", str(tmp_path / "out"),
                     "--config", str(judge_yaml), "--run-id", "another-run"]) == 3


def test_an_empty_file_is_inconclusive_without_starting_spark(tmp_path, capsys, monkeypatch):
    import canary.analysis as analysis

    def no_spark(*args, **kwargs):
        raise AssertionError("Spark was started for an empty file")

    monkeypatch.setattr(analysis, "run_spark", no_spark)
    (tmp_path / "obs.jsonl").write_text("")
    assert cli.main(["analyze", "--observations", str(tmp_path / "obs.jsonl"), "--out", str(tmp_path / "out")]) == 3
    printed = capsys.readouterr()
    assert printed.out.startswith("INCONCLUSIVE (score 0.0): no valid observations") and printed.err == ""


@pytest.mark.parametrize(("argv", "error"), [
    (["--observations", "/nonexistent/obs.jsonl"], "error: --observations /nonexistent/obs.jsonl does not exist"),
    (["--observations", "kafka://127.0.0.1:9", "--from", "yesterday"], "error: --from 'yesterday' is neither"),
    (["--observations", "kafka://127.0.0.1:9", "--from", "2000", "--to", "1000"],
     "error: --from 2000 is not before --to 1000"),
    (["--observations", "kafka://127.0.0.1:9", "--engine", "inline"], "error: the inline engine reads one JSON-lines"),
])
def test_a_bad_request_is_one_line_and_exit_2_before_any_work(tmp_path, capsys, argv, error):
    assert cli.main(["analyze", "--out", str(tmp_path / "out"), *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith(error) and err.count("\n") == 1, err
    assert not (tmp_path / "out").exists()
