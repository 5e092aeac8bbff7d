"""The broker rollout's rule after the judge: each reason on its own, their order, and that it never promotes a
verdict the judge did not."""

from __future__ import annotations

import itertools

import pytest

from canary.judge import Brief
from canary.rollout.broker.overrule import Overrule, overrule, overruled
from canary.rollout.core import Look, Verdict

PROMOTED = Verdict(verdict="PROMOTE", reason="no regression in 19 metric(s)", engine="spark",
                   analysis="analysis-1")
UNFAIR = {"fair": False, "representative": True, "reason": "the canary does not carry its share of client traffic"}
FAIR = {"fair": True, "representative": True, "reason": "the canary carries 0.95–1.05× a baseline broker's traffic"}
LOOK = Look(verdict="ROLLBACK", reason="critical regression: e2e_latency_p99: …", failed=["e2e_latency_p99"],
            at_s=30.0)


def test_a_disturbed_cluster_turns_promote_into_inconclusive_naming_the_first_three_problems():
    problems = ["at 3s: broker 2 down", "at 4s: 1 offline partition(s)", "at 9s: brokers [2] not registered",
                "at 12s: the cluster did not answer"]
    verdict, reasons = overruled(PROMOTED, disturbed=problems, traffic=FAIR, capacity="required")
    assert reasons == [Overrule.DISTURBED] and verdict.verdict == "INCONCLUSIVE"
    assert verdict.reason == ("the cluster was disturbed during the window (at 3s: broker 2 down; at 4s: 1 offline "
                              "partition(s); at 9s: brokers [2] not registered; …), so it cannot promote; the analysis "
                              "said PROMOTE: no regression in 19 metric(s)")
    assert (verdict.engine, verdict.analysis) == ("spark", "analysis-1")  # the rest of the verdict kept


def test_capacity_not_judged_turns_promote_into_inconclusive_when_required():
    verdict, reasons = overruled(PROMOTED, traffic=UNFAIR, capacity="required")
    assert reasons == [Overrule.CAPACITY_NOT_JUDGED] and verdict.verdict == "INCONCLUSIVE"
    assert verdict.reason == ("capacity was not judged: the canary does not carry its share of client traffic; the "
                              "probe and the metrics judged said PROMOTE (no regression in 19 metric(s)); a person "
                              "decides, or set capacity: not_required")
    unmeasured = overrule(PROMOTED, traffic=None, capacity="required")
    assert unmeasured.verdict == "INCONCLUSIVE" and "the window's traffic was not measured" in unmeasured.reason


def test_capacity_not_required_keeps_the_promote_and_says_what_was_not_judged():
    verdict, reasons = overruled(PROMOTED, traffic=UNFAIR, capacity="not_required")
    assert reasons == [Overrule.CAPACITY_NOT_REQUIRED] and verdict.verdict == "PROMOTE"
    assert verdict.reason == ("no regression in 19 metric(s); capacity not judged (capacity: not_required): the "
                              "canary does not carry its share of client traffic")


def test_a_fair_share_or_capacity_left_out_leaves_the_verdict_as_it_is():
    assert overruled(PROMOTED, traffic=FAIR, capacity="required") == (PROMOTED, [])
    assert overruled(PROMOTED, traffic=UNFAIR) == (PROMOTED, [])  # no capacity given: not the caller's to judge
    assert overruled(PROMOTED, disturbed=None) == (PROMOTED, [])


@pytest.mark.parametrize("word", ["PROMOTE", "INCONCLUSIVE"])
def test_a_wave_that_regressed_turns_the_runs_verdict_into_the_looks_rollback(word):
    judged = PROMOTED.model_copy(update={"verdict": word})
    verdict, reasons = overruled(judged, regressed=(2, LOOK))
    assert reasons == [Overrule.WAVE_REGRESSED]
    assert verdict.verdict == "ROLLBACK" and verdict.failed == ["e2e_latency_p99"]
    assert verdict.reason == "the look after promotion wave 2 saw a regression: critical regression: e2e_latency_p99: …"
    assert (verdict.engine, verdict.analysis) == ("interim", None)  # the look decided, not the window's analysis


@pytest.mark.parametrize("word", ["ROLLBACK", "INCONCLUSIVE"])
def test_no_reason_ever_turns_a_rollback_or_an_inconclusive_into_a_promote(word):
    judged = PROMOTED.model_copy(update={"verdict": word, "reason": "the judge's"})
    for disturbed, traffic, capacity, regressed in itertools.product(
            [(), ["at 1s: broker 1 down"]], [None, FAIR, UNFAIR], [None, "required", "not_required"],
            [None, (1, LOOK)]):
        verdict, reasons = overruled(judged, disturbed=disturbed, traffic=traffic, capacity=capacity,
                                     regressed=regressed)
        assert verdict.verdict != "PROMOTE"
        assert verdict == judged if regressed is None else reasons == [Overrule.WAVE_REGRESSED]


def test_every_reason_says_what_the_verdict_becomes_and_why():
    assert {reason: reason.word for reason in Overrule} == {
        Overrule.DISTURBED: "INCONCLUSIVE", Overrule.CAPACITY_NOT_JUDGED: "INCONCLUSIVE",
        Overrule.CAPACITY_NOT_REQUIRED: None, Overrule.WAVE_REGRESSED: "ROLLBACK"}
    assert all(len(reason.note) > 40 for reason in Overrule)


# ----- capacity alone (was traffic.capacity_verdict) -----

CAPACITY_PROMOTED = Verdict(verdict="PROMOTE", reason="no regression in 19 metric(s)", engine="inline")


def test_a_promote_without_a_fair_share_asks_a_person_when_capacity_is_required():
    traffic = {"fair": False, "representative": False, "reason": "the baseline brokers take 3.0 kB/s …"}
    judged = overrule(CAPACITY_PROMOTED, traffic=traffic, capacity="required")
    assert judged.verdict == "INCONCLUSIVE" and judged.engine == "inline"  # the rest of the verdict kept
    assert judged.reason.startswith("capacity was not judged: the baseline brokers take 3.0 kB/s …")
    assert "no regression in 19 metric(s)" in judged.reason
    assert overrule(CAPACITY_PROMOTED, traffic=None, capacity="required").verdict == "INCONCLUSIVE"


def test_capacity_not_required_promotes_and_says_what_was_not_judged():
    judged = overrule(CAPACITY_PROMOTED, traffic={"fair": False, "reason": "broker metrics are off"},
                      capacity="not_required")
    assert judged.verdict == "PROMOTE"
    assert judged.reason.endswith("capacity not judged (capacity: not_required): broker metrics are off")


def test_a_fair_share_or_another_verdict_is_left_as_it_is():
    assert overrule(CAPACITY_PROMOTED, traffic={"fair": True, "reason": "…"}, capacity="required") == CAPACITY_PROMOTED
    rolled_back = Brief(verdict="ROLLBACK", reason="e2e p99", failed=["e2e_latency_p99"])
    assert overrule(rolled_back, traffic={"fair": False, "reason": "idle"}, capacity="required") == rolled_back
