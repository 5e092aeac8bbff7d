"""The service stand-in's instances: one live MemberThread per instance name, started, stopped and switched between
protocols, and the check that the group has settled after a change."""

from __future__ import annotations

import time
from collections import Counter

from canary.lanes import client_lane
from canary.probe.sink import ObservationSink
from canary.rollout.migration.group import cluster_admin, describe_group
from canary.rollout.migration.ledger import DeliveryLedger, RebalanceRecorder
from canary.rollout.migration.member import MemberThread
from canary.rollout.migration.spec import MigrationError, MigrationSpec, Protocol


class Fleet:
    """The service's instances (one live incarnation per name). `switch` is idempotent: an instance already running
    on the protocol asked for is left alone. `observing` turns the instances' observations on (the window only)."""

    def __init__(self, spec: MigrationSpec, partitions: list[int], sink: ObservationSink, run_id: str):
        self.spec, self.partitions, self.sink, self.run_id = spec, partitions, sink, run_id
        self.recorder, self.ledger = RebalanceRecorder(), DeliveryLedger()
        self.live: dict[str, MemberThread] = {}
        self.incarnations: Counter[str] = Counter()
        self.observing = False
        self.admin = cluster_admin(spec)

    def names_in(self, lane: str) -> list[str]:
        """The spec's instance names of one lane, in the spec's order."""
        return [name for name in self.spec.names if client_lane(name) == lane]

    def start(self, name: str, protocol: Protocol) -> MemberThread:
        self.incarnations[name] += 1
        self.live[name] = MemberThread(self, name, protocol, self.incarnations[name]).start()
        return self.live[name]

    def stop(self, name: str) -> None:
        member = self.live.pop(name, None)
        if member is not None:
            member.close()

    def switch(self, name: str, protocol: Protocol) -> bool:
        """`name` on `protocol`: closed cleanly (committing) and started again when it ran another; True if changed."""
        current = self.live.get(name)
        if current is not None and current.protocol == protocol and current.error is None:
            return False
        self.stop(name)
        self.start(name, protocol)
        return True

    def protocols(self) -> dict[str, str]:
        return {name: member.protocol for name, member in sorted(self.live.items())}

    def describe_group(self, timeout: float = 15.0) -> dict:
        """The group as the coordinator sees it now (canary.rollout.migration.group.describe_group)."""
        return describe_group(self.admin, self.spec.group, timeout)

    def unsettled(self, quiet_s: float = 4.0) -> str | None:
        """Why the group is not settled yet, or None: every live instance healthy and holding a partition, every
        partition held exactly once, no callback for `quiet_s`, and the coordinator agrees (stable, members'
        assignments at their targets). Raises MigrationError when an instance's thread failed."""
        failed = [f"{member.key}: {member.error}" for member in self.live.values() if member.error]
        if failed:
            raise MigrationError(f"instance(s) failed: {'; '.join(failed)}")
        held = Counter(p for member in self.live.values() for p in member.assignment)
        if sorted(held) != self.partitions or any(count > 1 for count in held.values()):
            return f"partitions held {dict(sorted(held.items()))}, want each of {self.partitions} once"
        idle = [name for name, member in self.live.items() if not member.assignment]
        if idle:
            return f"instances without a partition: {idle}"
        if self.recorder.now() - self.recorder.last_at() < quiet_s:
            return "rebalancing"
        group = self.describe_group()
        if group["state"] != "STABLE" or len(group["members"]) != len(self.live):
            return f"coordinator: group {group['state']} with {len(group['members'])} member(s)"
        moving = [m["client_id"] for m in group["members"] if m["target"] is not None and m["target"] !=
                  m["assignment"]]
        return f"coordinator: {moving} not at their target assignment" if moving else None

    def settle(self, what: str) -> float:
        """Waits until the group is settled; returns the seconds it took. Raises MigrationError on timeout."""
        started = time.monotonic()
        deadline = started + self.spec.settle_timeout_s
        why: str | None = "not checked"
        while time.monotonic() < deadline:
            why = self.unsettled()
            if why is None:
                return round(time.monotonic() - started, 2)
            time.sleep(0.5)
        raise MigrationError(f"the group did not settle after {what} within {self.spec.settle_timeout_s:g}s: {why}")

    def close(self) -> None:
        for name in list(self.live):
            self.stop(name)
