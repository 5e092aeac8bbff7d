"""The steps of a migration canary run, in the rollout core's step contract (each audited, with a small JSON-able
result in run.json): preflight, join, window, judge, then promote or rollback, then verify. Every step after
preflight works on the instances this process started in the join, so they run only together, through the engine
(canary.rollout.migration.kind)."""

from __future__ import annotations

import time

from canary.judge import Brief
from canary.rollout.core import RolloutError, RunStatus, Verdict
from canary.rollout.core.audit import AuditAction
from canary.rollout.core.verdict import record_verdict, require_promotable
from canary.rollout.migration.preflight import preflight
from canary.rollout.migration.record import MigrationWindow
from canary.rollout.migration.run import MigrationRun
from canary.rollout.migration.session import MigrationSession
from canary.rollout.migration.spec import MigrationError, MigrationRefused


def preflight_step(run: MigrationRun) -> dict:
    """Reads the cluster and the group and changes nothing when refused (result.json says why). Then takes the
    cluster lock (one rollout per cluster: a broker rollout would disturb the compared rebalances) and keeps the
    evidence as the run's `before`."""
    try:
        evidence = preflight(run.spec)
    except MigrationRefused as exc:
        run.result = {"verdict": None, "refused": str(exc)}
        run.write_result()
        raise
    taken = run.lock.acquire(run.run_id, evidence["brokers"])
    run.holds_lock = True
    run.audit.record(run.step, AuditAction.LOCK_TAKEN if taken else AuditAction.LOCK_ALREADY_HELD_BY_RUN)
    run.state.update(before=evidence, status=RunStatus.PREFLIGHT)
    run.audit.record(run.step, AuditAction.SNAPSHOT, before=evidence)
    run.result = {"run_id": run.run_id, "spec": run.spec.to_dict(), "preflight": evidence}
    return {"group_version": evidence["group_version"], "migration_policy": evidence["migration_policy"],
            "topic_partitions": evidence["topic_partitions"], "lock_taken": taken}


def join_step(run: MigrationRun) -> dict:
    """Starts the service's instances, children of this process: the baseline instances on classic, then the canary
    instances on consumer (the classic group takes its first KIP-848 member), each until the group settled.
    Idempotent within the process: an instance already on its protocol is left alone."""
    if run.session is None:
        run.session = MigrationSession(run.spec, run.run_id, run.run_dir)
    joined = run.session.join()
    run.result.update(joined)
    group = joined["group_at_start"]
    run.audit.record(run.step, AuditAction.JOINED, group_state=group["state"], group_type=group["type"],
                     members={member["client_id"]: member["protocol"] for member in group["members"]})
    run.state.update(status=RunStatus.CANARY_DEPLOYED)
    return {"baseline_settled_s": joined["baseline_settled_s"], "canary_settled_s": joined["canary_settled_s"],
            "group_type": group["type"]}


def window_step(run: MigrationRun) -> dict:
    """The compared window: steady traffic, and one baseline instance restarts into it."""
    session = run.live_session()
    start_ms = int(time.time() * 1000)
    window = session.observe_window()
    run.result["window"] = window
    # a migration window has no interim look and never stops early: its disruption is judged on the whole window
    # run.json's window; result.json has all
    kept = {k: v for k, v in window.items() if k in MigrationWindow.model_fields}
    run.state.update(window=MigrationWindow(**kept, start_ms=start_ms, end_ms=int(time.time() * 1000)),
                     verdict=None)
    run.audit.record(run.step, AuditAction.WINDOW, **window)
    return window


def judge_step(run: MigrationRun) -> dict:
    """The window's verdict: rebalance disruption per lane and the judge on lag and processing time, combined
    (verdict.json, events.jsonl, result.json)."""
    judged = run.live_session().verdict()
    run.result.update(judged)
    run.write_result()
    combined, disruption, lag = Brief.of(judged), Brief.of(judged["disruption"]), Brief.of(judged["judge"])
    run.say("%s", combined.line())
    return record_verdict(run, Verdict(verdict=combined.verdict, reason=combined.reason, engine="inline",
                                       failed=lag.failed), disruption=disruption.verdict, judge=lag.verdict)


def promote_step(run: MigrationRun, approve: bool = False) -> dict:
    """Baseline instances to `consumer`, one at a time, while the traffic goes on. Needs PROMOTE (or INCONCLUSIVE
    with approval), unless a person chose promote (the spec's action)."""
    if run.spec.action != "promote":
        require_promotable(run, approve)
    return _act(run, "promote", RunStatus.PROMOTED)


def rollback_step(run: MigrationRun) -> dict:
    """Canary instances back to `classic`, one at a time, while the traffic goes on."""
    return _act(run, "rollback", RunStatus.ROLLED_BACK)


def _act(run: MigrationRun, action: str, status: RunStatus) -> dict:
    done = run.live_session().act(action)
    run.result["action"] = done
    run.audit.record(run.step, AuditAction(action), protocol=done["protocol"], switched=done["switched"])
    run.state.update(status=status)
    return done


def verify_step(run: MigrationRun) -> dict:
    """Every instance on the promised protocol (as started and by the coordinator), the group stable, everything the
    topic held at verify committed; then the lock is released. Raises MigrationError with what differs."""
    status = run.state.status
    if not status.finished or status.verified:
        raise RolloutError(f"nothing to verify yet: the run is at '{status}'; promote or roll back first")
    action = "promote" if status.promoted else "rollback"
    verified = run.live_session().verify(action)
    run.result["verify"] = verified
    path = run.write_result()
    if not verified["ok"]:
        run.audit.record(run.step, AuditAction.DIFFERENCES, problems=verified["problems"])
        raise MigrationError(f"{action} did not reach the promised state: {'; '.join(verified['problems'])} "
                             f"(see {path})")
    released = run.lock.release(run.run_id)
    run.holds_lock = False
    run.audit.record(run.step, AuditAction.LOCK_RELEASED if released else AuditAction.LOCK_NOT_HELD)
    run.state.update(status=status.as_verified())
    return {"ok": True, "protocols": verified["protocols"], "group_type": verified["group"]["type"],
            "records": verified["records"], "lock_released": released}
