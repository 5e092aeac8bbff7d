"""The service's instances as processes (canary.clients.deployer.ServiceDeployer running the team's consumer
command, or the sample subscribed consumer): started, stopped and switched between protocols; their rebalance
callbacks read back; and the check, from the coordinator, that the group has settled after a change."""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

from canary.clients.deployer import DeployError, Instance, ServiceDeployer, log_tail
from canary.clients.rebalance import RebalanceEvent
from canary.lanes import client_lane
from canary.rollout.migration.group import cluster_admin, describe_group
from canary.rollout.migration.spec import MigrationError, MigrationSpec, Protocol

SAMPLE_COMMAND = [sys.executable, "-m", "canary.examples.services.group_consumer"]


def service_dir(spec: MigrationSpec, run_id: str) -> Path:
    """Where the instances' state, logs and callbacks files go: the spec's service_dir, else a directory of the
    run's under the system's temporary directory (never the run storage: it holds the connection file)."""
    return Path(spec.service_dir) if spec.service_dir else Path(tempfile.gettempdir()) / "kafka-canary-migration" / \
        run_id


class Fleet:
    """The service's instances, one process per name, tied to this process (none outlives the run). `switch` is
    idempotent: an instance already running on the protocol asked for is left alone."""

    def __init__(self, spec: MigrationSpec, partitions: list[int], run_id: str):
        self.spec, self.partitions = spec, partitions
        self.deployer = ServiceDeployer(service_dir(spec, run_id), spec.bootstrap_servers, topic=spec.topic,
                                        group=spec.group, client=spec.client, run_id=run_id, tie_to_parent=True,
                                        cwd=spec.cwd or None, commands={"consumer": spec.command or SAMPLE_COMMAND},
                                        env=spec.env)
        for name in spec.names:  # callbacks of an earlier process's instances (a run started over) are not this run's
            self.deployer.rebalances_file(name).unlink(missing_ok=True)
        self.admin = cluster_admin(spec)
        self._view: str | None = None      # the coordinator's last view, and since when it has not changed
        self._view_since = time.monotonic()

    def names_in(self, lane: str) -> list[str]:
        """The spec's instance names of one lane, in the spec's order."""
        return [name for name in self.spec.names if client_lane(name) == lane]

    def _wanted(self, name: str, protocol: Protocol) -> Instance:
        lane = client_lane(name)
        names = self.names_in(lane)
        assignor = self.spec.classic_assignor if protocol == "classic" else self.spec.remote_assignor
        return Instance(name, "consumer", lane, self.spec.version, names.index(name), len(names),
                        group_protocol=protocol, assignor=assignor or "")

    def start(self, name: str, protocol: Protocol) -> None:
        try:
            self.deployer.start(self._wanted(name, protocol))
        except DeployError as exc:
            raise MigrationError(str(exc)) from exc

    def stop(self, name: str) -> None:
        self.deployer.stop(name)

    def switch(self, name: str, protocol: Protocol) -> bool:
        """`name` on `protocol`: closed cleanly (SIGTERM: it commits and leaves) and started again when it ran
        another; True if changed."""
        current = self.deployer.status(name)
        if current is not None and current.running and current.instance == self._wanted(name, protocol):
            return False
        self.start(name, protocol)
        return True

    def protocols(self) -> dict[str, str]:
        """The protocol each running instance was started with."""
        return {s.instance.name: s.instance.group_protocol for s in self.deployer.instances() if s.running}

    def events(self) -> list[RebalanceEvent]:
        """Every instance's rebalance callbacks so far (canary.clients.member), in time order; seconds since the
        epoch. A line that cannot be read (an instance killed mid-write) is left out."""
        events = []
        for status in self.deployer.instances():
            path = self.deployer.rebalances_file(status.instance.name)
            for line in path.read_text().splitlines() if path.exists() else []:
                try:
                    raw = json.loads(line)
                    events.append(RebalanceEvent(raw["at_ms"] / 1000, raw["instance"], raw["lane"], raw["kind"],
                                                 tuple(raw["partitions"])))
                except (ValueError, KeyError, TypeError):
                    continue
        return sorted(events, key=lambda e: e.at)

    def describe_group(self, timeout: float = 15.0) -> dict:
        """The group as the coordinator sees it now (canary.rollout.migration.group.describe_group)."""
        return describe_group(self.admin, self.spec.group, timeout)

    def _exited(self) -> None:
        """Raises MigrationError naming every known instance that is not running, with its log's last lines."""
        gone = [s.instance.name for s in self.deployer.instances() if not s.running]
        if gone:
            logs = "; ".join(f"{name}: {log_tail(self.deployer.directory / f'{name}.log', 3)}" for name in gone)
            raise MigrationError(f"instance(s) exited: {logs}")

    def unsettled(self, quiet_s: float = 4.0) -> str | None:
        """Why the group is not settled yet, or None, from the coordinator: every running instance a member holding a
        partition, every partition held exactly once, the group stable with each member at its target, and that
        view unchanged for `quiet_s`. Raises MigrationError when an instance exited."""
        self._exited()
        group = self.describe_group()
        view = json.dumps(group, sort_keys=True)
        if view != self._view:
            self._view, self._view_since = view, time.monotonic()
        running = len(self.protocols())
        if group["state"] != "STABLE" or len(group["members"]) != running:
            return f"coordinator: group {group['state']} with {len(group['members'])} of {running} member(s)"
        held = sorted(p for member in group["members"] for p in member["assignment"])
        if held != self.partitions:
            return f"partitions held {held}, want each of {self.partitions} once"
        idle = [m["client_id"] for m in group["members"] if not m["assignment"]]
        if idle:
            return f"members without a partition: {idle}"
        moving = [m["client_id"] for m in group["members"] if m["target"] is not None and m["target"] !=
                  m["assignment"]]
        if moving:
            return f"coordinator: {moving} not at their target assignment"
        return "rebalancing" if time.monotonic() - self._view_since < quiet_s else None

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
        """Stops every instance (each commits and leaves) and removes the connection file."""
        self.deployer.stop_all()
        self.deployer.client_file.unlink(missing_ok=True)

