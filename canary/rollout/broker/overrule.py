"""The broker rollout's verdict after the judge: what the rollout knows and the judge does not overrules the judge's
verdict, by one rule with a named reason for each case (like Strimzi's `RestartReason`: each reason with its note).

* `DISTURBED`: the cluster was disturbed during the window (a broker down, offline partitions): PROMOTE becomes
  INCONCLUSIVE.
* `CAPACITY_NOT_JUDGED`: the window had no representative traffic through a canary carrying its fair share
  (canary.rollout.broker.traffic) and the spec requires capacity judged: PROMOTE becomes INCONCLUSIVE.
* `CAPACITY_NOT_REQUIRED`: the same with `capacity: not_required`: PROMOTE stays, its reason says what was not judged.
* `WAVE_REGRESSED`: the look after a promotion wave saw a regression: the run's verdict becomes ROLLBACK.

The rule only ever makes a verdict more careful: no reason turns a ROLLBACK or an INCONCLUSIVE into a PROMOTE. The
judge step applies it to the window's verdict (canary.rollout.broker.verdict), the promotion to the run's verdict when
a wave's look regressed (canary.rollout.broker.promote)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from canary.judge import INCONCLUSIVE, PROMOTE, ROLLBACK, VerdictWord
from canary.rollout.broker.spec import Capacity
from canary.rollout.core import Look, Verdict


class Overrule(StrEnum):
    """Why a broker rollout's verdict is not the judge's: each reason says what the verdict becomes (`word`; None: it
    keeps its own) and why (`note`). Applied in this order."""

    DISTURBED = "disturbed"
    CAPACITY_NOT_JUDGED = "capacity not judged"
    CAPACITY_NOT_REQUIRED = "capacity not required"
    WAVE_REGRESSED = "wave regressed"

    @property
    def word(self) -> VerdictWord | None:
        return _WORDS[self]

    @property
    def note(self) -> str:
        return _NOTES[self]


_WORDS: dict[Overrule, VerdictWord | None] = {
    Overrule.DISTURBED: INCONCLUSIVE,
    Overrule.CAPACITY_NOT_JUDGED: INCONCLUSIVE,
    Overrule.CAPACITY_NOT_REQUIRED: None,
    Overrule.WAVE_REGRESSED: ROLLBACK,
}
_NOTES: dict[Overrule, str] = {
    Overrule.DISTURBED: "a broker that failed in the window hurt both lanes (every acks=all write waits for its "
                        "replicas) and may have failed because of the canary; lanes that look alike then prove "
                        "nothing: a person decides",
    Overrule.CAPACITY_NOT_JUDGED: "a broker that does less looks healthier for it: without representative traffic "
                                  "through a canary carrying its fair share its capacity was not judged, so a person "
                                  "decides, or the rollout rolls back",
    Overrule.CAPACITY_NOT_REQUIRED: "the spec accepts a promotion whose capacity was not judged (capacity: "
                                    "not_required); the reason says what was not",
    Overrule.WAVE_REGRESSED: "the brokers a promotion wave changed did worse than the brokers compared with them at "
                             "the look after it: the promoted waves roll back",
}


@dataclass(frozen=True)
class _Facts:
    disturbed: Sequence[str] | None
    traffic: Mapping[str, Any] | None
    capacity: Capacity | None
    regressed: tuple[int, Look] | None


def _disturbed(verdict: Verdict, facts: _Facts) -> dict[str, Any] | None:
    if verdict.verdict != PROMOTE or not facts.disturbed:
        return None
    shown = "; ".join(facts.disturbed[:3]) + ("; …" if len(facts.disturbed) > 3 else "")
    return {"reason": f"the cluster was disturbed during the window ({shown}), so it cannot promote; the analysis "
                      f"said PROMOTE: {verdict.reason}"}


def _capacity_unjudged(verdict: Verdict, facts: _Facts) -> bool:
    return (facts.capacity is not None and verdict.verdict == PROMOTE
            and not (facts.traffic and facts.traffic.get("fair")))


def _why_not_judged(facts: _Facts) -> str:
    return (facts.traffic or {}).get("reason") or "the window's traffic was not measured"


def _capacity_not_judged(verdict: Verdict, facts: _Facts) -> dict[str, Any] | None:
    if not _capacity_unjudged(verdict, facts) or facts.capacity != "required":
        return None
    return {"reason": f"capacity was not judged: {_why_not_judged(facts)}; the probe and the metrics judged said "
                      f"PROMOTE ({verdict.reason}); a person decides, or set capacity: not_required"}


def _capacity_not_required(verdict: Verdict, facts: _Facts) -> dict[str, Any] | None:
    if not _capacity_unjudged(verdict, facts) or facts.capacity != "not_required":
        return None
    return {"reason": f"{verdict.reason}; capacity not judged (capacity: not_required): {_why_not_judged(facts)}"}


def _wave_regressed(verdict: Verdict, facts: _Facts) -> dict[str, Any] | None:
    if facts.regressed is None:
        return None
    wave, look = facts.regressed
    # The look decided, not the analysis of the window: the verdict is the look's, reached at an interim look.
    return {"reason": f"the look after promotion wave {wave} saw a regression: {look.reason}", "failed": look.failed,
            "engine": "interim", "analysis": None}


_RULES: dict[Overrule, Callable[[Verdict, _Facts], dict[str, Any] | None]] = {
    Overrule.DISTURBED: _disturbed,
    Overrule.CAPACITY_NOT_JUDGED: _capacity_not_judged,
    Overrule.CAPACITY_NOT_REQUIRED: _capacity_not_required,
    Overrule.WAVE_REGRESSED: _wave_regressed,
}


def overruled(verdict: Verdict, *, disturbed: Sequence[str] | None = (), traffic: Mapping[str, Any] | None = None,
              capacity: Capacity | None = None,
              regressed: tuple[int, Look] | None = None) -> tuple[Verdict, list[Overrule]]:
    """`verdict` as the rollout overrules it, with the reasons that did, in order (none: the verdict as it was).
    disturbed: what disturbed the cluster during the window, each once; traffic: the window's share of client traffic
    (canary.rollout.broker.traffic.share; None: not measured), judged when `capacity` (the spec's) is given;
    regressed: the promotion wave whose look saw a regression, with that look."""
    facts = _Facts(disturbed, traffic, capacity, regressed)
    applied = []
    for reason, rule in _RULES.items():
        update = rule(verdict, facts)
        if update is not None:
            verdict = verdict.model_copy(update={"verdict": reason.word or verdict.verdict, **update})
            applied.append(reason)
    return verdict, applied


def overrule(verdict: Verdict, *, disturbed: Sequence[str] | None = (), traffic: Mapping[str, Any] | None = None,
             capacity: Capacity | None = None, regressed: tuple[int, Look] | None = None) -> Verdict:
    """`verdict` as the rollout overrules it (`overruled`, without the reasons)."""
    return overruled(verdict, disturbed=disturbed, traffic=traffic, capacity=capacity, regressed=regressed)[0]
