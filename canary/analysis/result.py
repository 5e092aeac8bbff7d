"""What an analysis gives back: its verdict and where it wrote it, and the verdict as an exit code."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from canary.judge import Brief
from canary.outcome import Outcome


@dataclass(frozen=True)
class AnalysisResult:
    """`exit_code`: 0 PROMOTE, 1 ROLLBACK, 3 INCONCLUSIVE, 2 error; `verdict`: the judge's verdict (verdict.json
    in `out`), None when the analysis failed; `log`: where the engine's output went, if anywhere."""
    engine: str
    exit_code: int
    out: Path
    verdict: dict | None
    log: Path | None = None

    @property
    def verdict_file(self) -> Path:
        return self.out / "verdict.json"

    @classmethod
    def judged(cls, engine: str, out: Path, verdict: dict) -> AnalysisResult:
        return cls(engine, Brief.of(verdict).outcome.exit_code, out, verdict)

    @classmethod
    def from_job(cls, engine: str, exit_code: int, out: Path, log: Path | None = None) -> AnalysisResult:
        """The result of a job whose exit code is its verdict and which wrote out/verdict.json: an exit code other
        than a verdict's, or no verdict.json, is a failure (exit 2, no verdict)."""
        verdict_file = out / "verdict.json"
        verdicts = (Outcome.PROMOTE, Outcome.ROLLBACK, Outcome.INCONCLUSIVE)
        if Outcome.of_exit_code(exit_code) not in verdicts or not verdict_file.exists():
            return cls(engine, Outcome.ERROR.exit_code, out, None, log)
        return cls(engine, exit_code, out, json.loads(verdict_file.read_text()), log)


def summary(verdict: dict) -> str:
    """The verdict in one line, as the job and the CLI print it."""
    return f"{verdict['verdict']} (score {verdict['score']}): {verdict['reason']}"
