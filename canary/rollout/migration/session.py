"""One migration run's instances and what is done with them (MigrationSession): the service's instances (the fleet:
processes running the team's consumer, or the sample), synthetic traffic only when asked, and what is done with
them: join, the window, its verdict, promote or roll back, verify. `close` stops every instance and the producer:
nothing of a run outlives the process that runs it."""

from __future__ import annotations

import contextlib
import json
import time
from pathlib import Path

from confluent_kafka.admin import AdminClient

from canary.kafka.group_offsets import end_offsets, group_reader, short_of
from canary.kafka.wait import WaitTimeout, wait_until
from canary.observations import OBSERVATIONS_TOPIC
from canary.probe.sink import ensure_observations_topic
from canary.rollout.core.observations import fetch_observations
from canary.rollout.migration.actions import promised_protocol, promote, rollback, verify
from canary.rollout.migration.fleet import Fleet
from canary.rollout.migration.group import cluster_admin, topic_partitions
from canary.rollout.migration.spec import MigrationError, MigrationSpec
from canary.rollout.migration.traffic import Traffic
from canary.rollout.migration.verdict import window_verdict

# The instances' observation sinks send within a second; the window's last ones are read after this.
_OBSERVATIONS_SETTLE_S = 3.0


class MigrationSession:
    """The fleet of instances, the synthetic traffic (rate > 0) and the window's span (seconds since the epoch).
    `out_dir`: the run's work directory (the run storage sends its files on). `close` is safe to call more than
    once."""

    def __init__(self, spec: MigrationSpec, run_id: str, out_dir: Path):
        self.spec, self.run_id, self.out_dir = spec, run_id, out_dir
        self.observations = self.out_dir / "observations.jsonl"
        self.observations.unlink(missing_ok=True)
        admin = cluster_admin(spec)
        _observations_topic(admin)
        self.fleet = Fleet(spec, topic_partitions(admin, spec.topic, 30.0) or [], run_id)
        self.traffic: Traffic | None = None
        self.synthetic: dict | None = None
        self.span: tuple[float, float] | None = None
        self.disturbances = 0

    def join(self) -> dict:
        """The baseline instances on classic first (the service as it runs today), then the canary joins on
        consumer; each time until the group settled. An instance already running as asked is left alone."""
        for name in self.fleet.names_in("baseline"):
            self.fleet.switch(name, "classic")
        baseline_settled_s = self.fleet.settle("the baseline instances joined")
        for name in self.fleet.names_in("canary"):
            self.fleet.switch(name, "consumer")
        canary_settled_s = self.fleet.settle("the canary instances joined")
        return {"baseline_settled_s": baseline_settled_s, "canary_settled_s": canary_settled_s,
                "group_at_start": self.fleet.describe_group()}

    def observe_window(self) -> dict:
        """The compared window: the service's traffic (and the synthetic traffic, when asked, until verify), and one
        baseline instance restarts `disturb_at_s` into it so both protocols have a rebalance to handle. Then the
        instances' observations of the window are read from the observations topic. Returns the window's record
        (times in seconds since the epoch)."""
        spec, fleet = self.spec, self.fleet
        if spec.rate > 0:
            self.traffic = Traffic(spec, fleet.partitions).start()
        start = time.time()
        time.sleep(spec.disturb_at_s)
        disturbed = spec.names[0]
        fleet.stop(disturbed)
        time.sleep(spec.restart_gap_s)
        restarted = time.time()
        fleet.start(disturbed, "classic")
        settled = fleet.settle(f"{disturbed} restarted")
        time.sleep(max(0.0, start + spec.window_s - time.time()))
        end = time.time()
        rejoined = any(e.instance.startswith(f"{disturbed}#") and e.at >= restarted and e.kind == "assigned"
                       and e.partitions for e in fleet.events())
        self.span, self.disturbances = (start, end), int(rejoined)
        time.sleep(_OBSERVATIONS_SETTLE_S)
        observed = fetch_observations(spec.bootstrap_servers, spec.client, self.run_id, int(start * 1000),
                                      int(end * 1000), self.observations)
        return {"start_s": round(start, 3), "end_s": round(end, 3), "observations": self.observations.name,
                "observed": observed, "disturbance": {
            "instance": disturbed, "restarted_at_s": round(restarted, 3), "rejoined": rejoined, "settled_s": settled}}

    def verdict(self) -> dict:
        """The window's verdict (out_dir/verdict.json), and every rebalance callback so far in events.jsonl."""
        if self.span is None:
            raise MigrationError("the window's verdict needs the window first")
        events = self.fleet.events()
        judged = window_verdict(self.spec, events, self.span, self.disturbances, self.observations, self.out_dir)
        (self.out_dir / "events.jsonl").write_text("".join(json.dumps(event.to_dict()) + "\n" for event in events))
        return judged

    def act(self, action: str) -> dict:
        """Promote or roll back while the traffic goes on; the result names the action."""
        done = promote(self.fleet) if action == "promote" else rollback(self.fleet)
        return {**done, "name": action}

    def verify(self, action: str, drain_timeout: float = 60.0) -> dict:
        """Stops the synthetic traffic, then verifies every instance on the protocol `action` promised and that the
        group committed everything the topic held when verify began (up to `drain_timeout`)."""
        self.stop_traffic()
        want = promised_protocol(action)
        verified = verify(self.fleet, {name: want for name in sorted(self.spec.names)})
        records = self._caught_up(drain_timeout)
        if records["short"]:
            verified["problems"].append(f"{sum(records['short'].values())} record(s) the topic held when verify "
                                        f"began were not committed within {drain_timeout:g}s: {records['short']}")
            verified["ok"] = False
        return verified | {"records": records | {"synthetic": self.synthetic}}

    def _caught_up(self, timeout: float) -> dict:
        """Waits until the group's commits reach the topic's end offsets read now; returns those ends and what is
        short of them, per partition."""
        spec = self.spec
        with group_reader(spec.bootstrap_servers, spec.client, spec.group) as reader:
            ends = end_offsets(reader, spec.topic, self.fleet.partitions)
            short: dict[int, int] = {}

            def behind() -> str | None:
                short.clear()
                short.update(short_of(reader, spec.topic, ends))
                return f"commits short of the end: {short}" if short else None
            with contextlib.suppress(WaitTimeout):
                wait_until("the group committing what the topic held", timeout, behind)
        return {"ends": ends, "short": dict(short)}

    def stop_traffic(self) -> None:
        if self.traffic is not None:
            self.synthetic = self.traffic.stop()
            self.traffic = None

    def close(self) -> None:
        self.stop_traffic()
        self.fleet.close()


def _observations_topic(admin: AdminClient, timeout: float = 30.0) -> None:
    """The observations topic the instances write to, created when missing."""
    brokers = admin.describe_cluster(request_timeout=timeout).result(timeout=timeout + 5).nodes
    ensure_observations_topic(admin, OBSERVATIONS_TOPIC, len(brokers), timeout)
