"""What one sweep ends with: result.json's record (SweepResult) and its small form (SweepBrief) the CLI, the
Airflow operator and the health sweep DAG read. run.py makes them, report.py shows them."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict

RESULT_SCHEMA = "kafka-canary/sweep-result"


@dataclass
class SweepResult:
    """JSON-able outcome of one sweep (result.json holds this plus the judge verdicts)."""

    schema: str
    schema_version: int
    cluster: str
    sweep_id: str
    verdict: str
    reason: str
    first_sweep: bool
    reference: list[str]
    during_rollout: bool
    bootstrap_servers: str
    started_ms: int
    finished_ms: int
    duration_s: float
    rate: float
    seconds: float
    summary: dict
    excluded: dict
    probe: dict
    out: str
    result_file: str
    report: str
    history: str  # the cluster's history store (a directory, or an object store's URL)
    history_file: str
    trend_file: str
    trend_png: str
    pruned: list[str]

    def to_dict(self) -> dict:
        return asdict(self)

    def brief(self) -> SweepBrief:
        return SweepBrief(**{key: getattr(self, key) for key in (
            "cluster", "sweep_id", "verdict", "reason", "first_sweep", "during_rollout", "seconds", "report",
            "result_file", "history", "history_file", "trend_file", "summary")}, reference_sweeps=len(self.reference))


class SweepBrief(BaseModel):
    """The small form of a sweep's result, what the CLI, the Airflow operator and the health sweep DAG read (its
    dict form travels as XCom and the CLI's --json). verdict: HEALTHY, DEGRADED or INCONCLUSIVE (the sweep's own)."""

    model_config = ConfigDict(extra="forbid")

    cluster: str
    sweep_id: str
    verdict: str
    reason: str
    first_sweep: bool
    during_rollout: bool
    seconds: float
    report: str
    result_file: str
    history: str
    history_file: str
    trend_file: str
    reference_sweeps: int
    summary: dict[str, Any]
    conn_id: str | None = None          # the Airflow connection swept (the operator's)
    alert: dict[str, Any] | None = None  # the alert the CLI sent, when it sent one

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(exclude_none=True)
