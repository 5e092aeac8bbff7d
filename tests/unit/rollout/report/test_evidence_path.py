"""The evidence's path in the report: each metric's e-value at every interim look and at the final analysis, the
closest to their boundary drawn against it; none without looks that carry evidence."""

from __future__ import annotations

from canary.judge import e_values
from canary.rollout.core.record import Look, RunRecord, Window
from canary.rollout.report.evidence_path import evidence_svg, paths

FINAL = {"metrics": [
    {"name": "e2e_latency_p99", "test": {"e_value": 40.0, "threshold": 20.0}, "tolerance": None},
    {"name": "produce_error_rate", "test": {"e_value": 0.5, "threshold": 20.0},
     "tolerance": {"e_value": 3.0, "threshold": 20.0}},
    {"name": "availability", "test": {"e_value": None, "threshold": 20.0}}]}


def _record(*looks: Look) -> RunRecord:
    return RunRecord(run_id="r", created_ms=0, spec={}, window=Window(start_ms=0, end_ms=60_000, interim=list(looks)))


def test_e_values_take_each_metric_s_strongest_test():
    assert e_values(FINAL) == {"e2e_latency_p99": [40.0, 20.0], "produce_error_rate": [3.0, 20.0]}


def test_the_path_runs_through_the_looks_to_the_final_analysis_and_is_drawn_against_the_boundary():
    looks = [Look(verdict="PROMOTE", reason="-", at_s=20.0, evidence={"e2e_latency_p99": [2.0, 20.0]}),
             Look(verdict="PROMOTE", reason="-", at_s=40.0, evidence={"e2e_latency_p99": [9.0, 20.0]})]
    points, bounds = paths(_record(*looks), FINAL)
    assert points["e2e_latency_p99"] == [(20.0, 2.0), (40.0, 9.0), (60.0, 40.0)]
    assert bounds == {"e2e_latency_p99": 20.0, "produce_error_rate": 20.0}
    svg = evidence_svg(_record(*looks), FINAL)
    assert svg.startswith('<svg role="img" aria-label="The evidence of a regression per metric')
    assert "boundary 20" in svg and "e2e_latency_p99 40 at most (boundary 20)" in svg
    assert svg.count("<polyline") == 2


def test_no_evidence_no_picture():
    assert evidence_svg(_record(Look(verdict="PROMOTE", reason="-", at_s=20.0)), {}) == ""
    assert evidence_svg(RunRecord(run_id="r", created_ms=0, spec={}), FINAL) == ""
