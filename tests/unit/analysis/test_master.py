"""A Spark master spark-submit would refuse is refused before any work, in one line (a typo must not read as a
verdict: exit 1 is ROLLBACK)."""

import pytest

from canary.analysis import AnalysisRequest, RequestError, analyze
from canary.analysis.submit import check_master


@pytest.mark.parametrize("master", ["local", "local[2]", "local[*]", "local[2,3]", "spark://127.0.0.1:7077",
                                    "spark://a:7077,b:7077", "yarn", "k8s://https://127.0.0.1:6443"])
def test_the_masters_spark_submit_takes_pass(master):
    check_master(master)


@pytest.mark.parametrize("master", ["nonsense://x", "local[two]", "spark://", "127.0.0.1:7077"])
def test_anything_else_is_refused_before_the_job_runs(master, tmp_path):
    observations = tmp_path / "observations.jsonl"
    observations.write_text("")
    with pytest.raises(RequestError, match="is not a Spark master") as refused:
        analyze(AnalysisRequest(str(observations), tmp_path / "out"), master=master)
    assert "\n" not in str(refused.value)
