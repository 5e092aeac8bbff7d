"""After the verdict: promote (baseline instances to `consumer`), rollback (canary instances back to `classic`),
each one instance at a time, and verify the promised state."""

from __future__ import annotations

from canary.rollout.migration.fleet import Fleet
from canary.rollout.migration.spec import Protocol


def promote(fleet: Fleet) -> dict:
    """Baseline instances to `consumer`, one at a time, each after the group settled again. Idempotent."""
    return _switch_one_at_a_time(fleet, fleet.names_in("baseline"), "consumer")


def rollback(fleet: Fleet) -> dict:
    """Canary instances back to `classic`, one at a time. Idempotent."""
    return _switch_one_at_a_time(fleet, fleet.names_in("canary"), "classic")


def promised_protocol(action: str) -> Protocol:
    """Promote leaves every instance on consumer, rollback every instance on classic."""
    return "consumer" if action == "promote" else "classic"


def _switch_one_at_a_time(fleet: Fleet, names: list[str], protocol: Protocol) -> dict:
    switched, settled = [], {}
    for name in names:
        if fleet.switch(name, protocol):
            switched.append(name)
            settled[name] = fleet.settle(f"{name} switched to {protocol}")
    return {"protocol": protocol, "switched": switched, "settled_s": settled}


def verify(fleet: Fleet, promised: dict[str, str]) -> dict:
    """Every instance on its promised protocol (as started, and as the coordinator's member ids say) and the group
    settled. The records are the session's to check (it knows the topic's ends)."""
    problems = []
    why = fleet.unsettled()
    if why:
        problems.append(f"group not settled: {why}")
    group = fleet.describe_group()
    ours = fleet.protocols()
    if ours != promised:
        problems.append(f"instances run {ours}, promised {promised}")
    seen = {member["client_id"]: member["protocol"] for member in group["members"]}
    if seen != promised:
        problems.append(f"the coordinator sees {seen}, promised {promised}")
    return {"ok": not problems, "problems": problems, "protocols": ours, "group": group}
