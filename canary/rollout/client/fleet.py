"""The service's instances: started as wanted one at a time, stopped and forgotten, compared with what they
should be."""

from __future__ import annotations

from canary.clients.deployer import Instance
from canary.rollout.client.rollout import ClientRollout
from canary.rollout.core.audit import AuditAction


def fleet_differences(run: ClientRollout, wanted: list[Instance]) -> list[str]:
    known = {s.instance.name: s for s in run.services.instances()}
    problems = []
    for inst in wanted:
        s = known.get(inst.name)
        if s is None or not s.running:
            problems.append(f"{inst.name} is not running")
        elif s.instance != inst:
            problems.append(f"{inst.name} runs {s.instance.version} in the {s.instance.lane} lane, expected "
                            f"{inst.version} in the {inst.lane} lane")
    return problems


def converge(run: ClientRollout, wanted: list[Instance]) -> list[str]:
    """Every instance of `wanted` running as wanted, one at a time; returns the ones (re)started."""
    changed = []
    for inst in wanted:
        before = run.services.status(inst.name)
        if run.services.start(inst):
            run.audit.record(run.step, AuditAction.START_INSTANCE, instance=inst.name, role=inst.role, lane=inst.lane,
                           version=inst.version, was=before.to_dict() if before else None)
            run.say("%s %s started on %s (%s lane)", inst.role, inst.name, inst.version, inst.lane)
            changed.append(inst.name)
    return changed


def remove(run: ClientRollout, wanted: list[Instance]) -> list[str]:
    """Stops and forgets `wanted` (SIGTERM: a consumer commits, a producer flushes)."""
    stopped = []
    for inst in wanted:
        if run.services.status(inst.name) is not None:
            was_running = run.services.stop(inst.name)
            run.services.forget(inst.name)
            run.audit.record(run.step, AuditAction.STOP_INSTANCE, instance=inst.name, role=inst.role,
                             was_running=was_running)
            stopped.append(inst.name)
    return stopped
