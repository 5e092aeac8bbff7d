"""The run directory of one rollout: `run.json` (spec, the pre-rollout snapshot, canary brokers, step records,
verdict), `audit.jsonl`, the probe observations, the analysis output and the report.

`run.json` is rewritten atomically after every change, so a crashed or retried step finds the truth there:
which snapshot to roll back to, which brokers are the canaries, which steps finished.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from canary.errors import CanaryError
from canary.kafka.secrets import scrub_text
from canary.rollout.core.status import Status

SCHEMA = 1
RUN_FILE = "run.json"


class RunStateError(CanaryError):
    """The run directory does not fit the rollout asked for."""


RUNS_ENV = "KAFKA_CANARY_RUNS"
# One place for every run, wherever a command starts (not the working directory): the CLI, the DAGs' tasks and the
# report pages all find the same runs.
DEFAULT_RUNS = "~/.local/state/kafka-canary/rollouts"


def runs_root() -> Path:
    """$KAFKA_CANARY_RUNS, else ~/.local/state/kafka-canary/rollouts."""
    return Path(os.environ.get(RUNS_ENV) or DEFAULT_RUNS).expanduser()


def default_run_dir(run_id: str) -> Path:
    return runs_root() / run_id


class RunState:
    def __init__(self, run_dir: Path, data: dict, secrets: list[str] | tuple[str, ...] = ()):
        self.run_dir = Path(run_dir)
        self.data = data
        self.secrets = tuple(secrets)  # values cut out of run.json, should any text quote one

    @classmethod
    def open(cls, run_dir: Path, run_id: str, spec: dict, secrets: list[str] | tuple[str, ...] = ()) -> RunState:
        """The run in `run_dir`, created when new. Refuses a directory holding another run or another spec.
        `secrets`: values that must never be written (the client's passwords)."""
        run_dir = Path(run_dir)
        path = run_dir / RUN_FILE
        spec = json.loads(json.dumps(spec, default=str))  # as stored: tuples become lists
        if path.exists():
            data = json.loads(path.read_text())
            if data.get("schema") != SCHEMA:
                raise RunStateError(f"{path} has schema {data.get('schema')}; this version reads {SCHEMA}")
            if data["run_id"] != run_id:
                raise RunStateError(f"{run_dir} holds rollout {data['run_id']}, not {run_id}; use another --run-dir")
            if data["spec"] != spec:
                raise RunStateError(f"{run_dir} holds rollout {run_id} with a different spec; a changed rollout "
                                    f"needs a new run_id (or another --run-dir)")
            return cls(run_dir, data, secrets)
        run_dir.mkdir(parents=True, exist_ok=True)
        state = cls(run_dir, {"schema": SCHEMA, "run_id": run_id, "created_ms": int(time.time() * 1000),
                              "spec": spec, "status": "new", "before": None, "canary_brokers": None,
                              "steps": {}, "verdict": None}, secrets)
        state.save()
        return state

    @property
    def run_id(self) -> str:
        return self.data["run_id"]

    @property
    def before(self) -> dict | None:
        return self.data["before"]

    @property
    def snapshot(self) -> dict:
        """The pre-rollout snapshot (`before`) the steps after preflight work from."""
        if self.data["before"] is None:
            raise RunStateError(f"rollout {self.run_id} has no pre-rollout snapshot yet: preflight takes it")
        return self.data["before"]

    @property
    def status(self) -> Status:
        return Status(self.data["status"])

    def save(self) -> None:
        path = self.run_dir / RUN_FILE
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(scrub_text(json.dumps(self.data, indent=2, default=str), self.secrets) + "\n")
        os.replace(tmp, path)

    def update(self, **fields) -> None:
        self.data.update(fields)
        self.save()

    def step_started(self, name: str) -> int:
        record = self.data["steps"].setdefault(name, {"status": "new", "attempts": 0})
        record.update(status="running", attempts=record["attempts"] + 1, started_ms=int(time.time() * 1000))
        self.save()
        return record["attempts"]

    def step_finished(self, name: str, result: dict) -> None:
        self.data["steps"][name].update(status="done", finished_ms=int(time.time() * 1000), result=result,
                                        error=None)
        self.save()

    def step_failed(self, name: str, error: str) -> None:
        self.data["steps"][name].update(status="failed", finished_ms=int(time.time() * 1000), error=error)
        self.save()

    def step_done(self, name: str) -> bool:
        return self.data["steps"].get(name, {}).get("status") == "done"
