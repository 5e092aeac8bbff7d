"""The whole migration canary in one call: preflight, then the phases (join, window, verdict, promote or roll back,
verify) in this process, since the instances are its threads."""

from __future__ import annotations

import logging
import uuid
from pathlib import Path

from canary.rollout.migration.phases import (
    MigrationSession,
    act,
    chosen_action,
    join,
    judge_window,
    observe_window,
    verify_promised,
    write_json,
)
from canary.rollout.migration.preflight import preflight
from canary.rollout.migration.spec import MigrationError, MigrationRefused, MigrationSpec

log = logging.getLogger(__name__)


def run_migration(spec: MigrationSpec) -> dict:
    """Preflight, window, judge, promote or roll back, verify. Returns the result (also out_dir/result.json).
    Raises MigrationRefused before anything started, MigrationError when a step fails (every instance is closed
    and the producer stopped either way)."""
    spec.validate()
    out = Path(spec.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    try:
        checked = preflight(spec)
    except MigrationRefused as exc:
        write_json(out / "result.json", {"verdict": None, "refused": str(exc)})
        raise
    run_id = f"migration-{uuid.uuid4().hex[:8]}"
    session = MigrationSession(spec, run_id)
    result: dict = {"run_id": run_id, "spec": spec.to_dict(), "preflight": checked}
    try:
        result.update(join(session))
        result["window"] = observe_window(session)
        result.update(judge_window(session))
        write_json(out / "result.json", result)
        log.info("migration canary %s: %s (%s)", run_id, result["verdict"], result["reason"])
        action = chosen_action(spec.action, result["verdict"])
        result["action"] = act(session, action)
        result["verify"] = verify_promised(session, action)
        write_json(out / "result.json", result)
        if not result["verify"]["ok"]:
            raise MigrationError(f"{action} did not reach the promised state: "
                                 f"{'; '.join(result['verify']['problems'])} (see {out / 'result.json'})")
        return result
    finally:
        session.close()
