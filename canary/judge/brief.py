"""The brief of a verdict: what a rollout, a sweep and the logs keep of the judge's verdict (verdict.json, schema
`kafka-canary/verdict`) — its word, its reason and the metrics that failed — as one typed model."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict

from canary.judge.evidence import Decision
from canary.outcome import Outcome

PROMOTE: Final = "PROMOTE"
ROLLBACK: Final = "ROLLBACK"
INCONCLUSIVE: Final = "INCONCLUSIVE"
VerdictWord = Literal["PROMOTE", "ROLLBACK", "INCONCLUSIVE"]


class Brief(BaseModel):
    """A verdict in brief. `failed`: the metrics that failed (none when something else decided, e.g. a canary
    instance that exited)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    verdict: VerdictWord
    reason: str
    failed: list[str] = []

    @classmethod
    def of(cls, verdict: Mapping[str, Any]) -> Brief:
        """The brief of the judge's whole verdict (verdict.json), or of any verdict mapping with a verdict and a
        reason (a brief already, a part of a combined verdict): `failed` as it says, else its failed metrics."""
        failed = verdict["failed"] if "failed" in verdict else failed_metrics(verdict)
        return cls(verdict=verdict["verdict"], reason=verdict["reason"], failed=list(failed or []))

    @property
    def outcome(self) -> Outcome:
        """The verdict as an outcome: its exit code is the one every command exits with for it."""
        return Outcome(self.verdict)

    def line(self) -> str:
        """One line for logs and the command line: `ROLLBACK: critical regression: …`."""
        return f"{self.verdict}: {' '.join(self.reason.split())}"

    def to_dict(self) -> dict:
        return self.model_dump(mode="json")


def failed_metrics(verdict: Mapping[str, Any]) -> list[str]:
    """The names of the metrics that failed in `verdict` (what decided its ROLLBACK, if a metric did)."""
    return [m["name"] for m in verdict.get("metrics", []) if m["decision"] == Decision.FAIL]


def e_values(verdict: Mapping[str, Any]) -> dict[str, list[float]]:
    """Each tested metric's evidence of a regression so far: [e-value, the decision boundary 1/alpha] (the test's,
    else the tolerance guard's when it has more); metrics without a test are left out."""
    found: dict[str, list[float]] = {}
    for m in verdict.get("metrics", []):
        tests = [t for t in (m.get("test"), m.get("tolerance")) if t and t.get("e_value") is not None]
        if tests:
            best = max(tests, key=lambda t: t["e_value"] / t["threshold"])
            found[m["name"]] = [float(best["e_value"]), float(best["threshold"])]
    return found


def brief(verdict: Mapping[str, Any]) -> Brief:
    """What a rollout keeps of the judge's verdict: the verdict, its reason and the metrics that failed."""
    return Brief.of(verdict)
