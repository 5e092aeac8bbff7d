"""The service stand-in of one migration run, in this process (MigrationSession): its instances (the fleet), its
traffic and its observation sink, and what is done with them: join, the window, its verdict, promote or roll back
while the traffic goes on, verify. None of it outlives the process: `close` ends every instance and the producer."""

from __future__ import annotations

import json
import time
from pathlib import Path

from canary.probe.sink import ObservationSink
from canary.rollout.migration.actions import promised_protocol, promote, rollback, verify
from canary.rollout.migration.fleet import Fleet
from canary.rollout.migration.group import cluster_admin, topic_partitions
from canary.rollout.migration.spec import MigrationError, MigrationSpec
from canary.rollout.migration.traffic import Traffic
from canary.rollout.migration.verdict import window_verdict


class MigrationSession:
    """The fleet of instances, the traffic, the observation sink (out_dir/observations.jsonl, emptied first) and the
    window's span on the recorder's clock. `out_dir`: the run's work directory (the run storage sends its files
    on). `close` is safe to call more than once."""

    def __init__(self, spec: MigrationSpec, run_id: str, out_dir: Path):
        self.spec, self.run_id, self.out_dir = spec, run_id, out_dir
        self.observations = self.out_dir / "observations.jsonl"
        self.observations.unlink(missing_ok=True)
        self.sink = ObservationSink(None, None, path=self.observations)
        self.fleet = Fleet(spec, topic_partitions(cluster_admin(spec), spec.topic, 30.0) or [], self.sink, run_id)
        self.traffic: Traffic | None = None
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
        """The compared window: steady traffic (it goes on until verify), observations on, and one baseline
        instance restarts `disturb_at_s` into it so both protocols have a rebalance to handle. Returns the window's
        record (times in seconds on the recorder's clock)."""
        spec, fleet = self.spec, self.fleet
        self.traffic = Traffic(spec, fleet.partitions, fleet.ledger).start()
        fleet.observing = True
        start = fleet.recorder.now()
        time.sleep(spec.disturb_at_s)
        disturbed = spec.names[0]
        fleet.stop(disturbed)
        time.sleep(spec.restart_gap_s)
        fleet.start(disturbed, "classic")
        settled = fleet.settle(f"{disturbed} restarted")
        time.sleep(max(0.0, start + spec.window_s - fleet.recorder.now()))
        end = fleet.recorder.now()
        fleet.observing = False
        self.sink.close()
        rejoined = any(event.instance == fleet.live[disturbed].key and event.kind == "assigned" and event.partitions
                       for event in fleet.recorder.events)
        self.span, self.disturbances = (start, end), int(rejoined)
        return {"start_s": round(start, 2), "end_s": round(end, 2), "disturbance": {
            "instance": disturbed, "restarted_at_s": round(start + spec.disturb_at_s, 2), "rejoined": rejoined,
            "settled_s": settled}}

    def verdict(self) -> dict:
        """The window's verdict (out_dir/verdict.json), and every rebalance callback so far in events.jsonl."""
        if self.span is None:
            raise MigrationError("the window's verdict needs the window first")
        events = list(self.fleet.recorder.events)
        judged = window_verdict(self.spec, events, self.span, self.disturbances, self.observations, self.out_dir)
        (self.out_dir / "events.jsonl").write_text("".join(json.dumps(event.to_dict()) + "\n" for event in events))
        return judged

    def act(self, action: str) -> dict:
        """Promote or roll back while the traffic goes on; the result names the action."""
        done = promote(self.fleet) if action == "promote" else rollback(self.fleet)
        return {**done, "name": action}

    def verify(self, action: str) -> dict:
        """Stops the traffic, then verifies every instance on the protocol `action` promised."""
        self.stop_traffic()
        want = promised_protocol(action)
        return verify(self.fleet, {name: want for name in sorted(self.spec.names)})

    def stop_traffic(self) -> None:
        if self.traffic is not None:
            self.traffic.stop()
            self.traffic = None

    def close(self) -> None:
        self.stop_traffic()
        self.fleet.close()
        self.sink.close()
