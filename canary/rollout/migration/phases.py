"""The phases of one migration canary after preflight, over what the run keeps in this process (MigrationSession):
join (the baseline instances on classic, then the canary instances on consumer), the window (steady traffic, one
baseline instance restarts), its verdict, promote or roll back while the traffic goes on, and verify."""

from __future__ import annotations

import json
import time
from pathlib import Path

from confluent_kafka.admin import AdminClient

from canary.judge import PROMOTE
from canary.kafka.clients import QUIET_LOGGER
from canary.probe.sink import ObservationSink
from canary.rollout.migration.actions import promised_protocol, promote, rollback, verify
from canary.rollout.migration.fleet import Fleet
from canary.rollout.migration.group import topic_partitions
from canary.rollout.migration.spec import Action, MigrationError, MigrationSpec
from canary.rollout.migration.traffic import Traffic
from canary.rollout.migration.verdict import window_verdict


class MigrationSession:
    """What one run keeps in this process from the join to verify: the fleet of instances, the traffic, the
    observation sink (out_dir/observations.jsonl, emptied first) and the window's span on the recorder's clock.
    `close` closes every instance and stops the producer; it is safe to call more than once."""

    def __init__(self, spec: MigrationSpec, run_id: str):
        self.spec, self.run_id, self.out_dir = spec, run_id, Path(spec.out_dir)
        self.observations = self.out_dir / "observations.jsonl"
        self.observations.unlink(missing_ok=True)
        self.sink = ObservationSink(None, None, path=self.observations)
        admin = AdminClient({**spec.connection(), "logger": QUIET_LOGGER})
        self.fleet = Fleet(spec, topic_partitions(admin, spec.topic, 30.0) or [], self.sink, run_id)
        self.traffic: Traffic | None = None
        self.span: tuple[float, float] | None = None
        self.disturbances = 0

    def stop_traffic(self) -> None:
        if self.traffic is not None:
            self.traffic.stop()
            self.traffic = None

    def close(self) -> None:
        self.stop_traffic()
        self.fleet.close()
        self.sink.close()


def join(session: MigrationSession) -> dict:
    """The baseline instances on classic first (the service as it runs today), then the canary joins on consumer;
    each time until the group settled."""
    fleet = session.fleet
    for name in fleet.names_in("baseline"):
        fleet.start(name, "classic")
    baseline_settled_s = fleet.settle("the baseline instances joined")
    for name in fleet.names_in("canary"):
        fleet.start(name, "consumer")
    canary_settled_s = fleet.settle("the canary instances joined")
    return {"baseline_settled_s": baseline_settled_s, "canary_settled_s": canary_settled_s,
            "group_at_start": fleet.describe_group()}


def observe_window(session: MigrationSession) -> dict:
    """The compared window: steady traffic (it goes on until verify), observations on, and one baseline instance
    restarts `disturb_at_s` into it so both protocols have a rebalance to handle. Returns the window's record."""
    spec, fleet = session.spec, session.fleet
    session.traffic = Traffic(spec, fleet.partitions, fleet.ledger).start()
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
    session.sink.close()
    rejoined = any(event.instance == fleet.live[disturbed].key and event.kind == "assigned" and event.partitions
                   for event in fleet.recorder.events)
    session.span, session.disturbances = (start, end), int(rejoined)
    return {"start_s": round(start, 2), "end_s": round(end, 2), "disturbance": {
        "instance": disturbed, "restarted_at_s": round(start + spec.disturb_at_s, 2), "rejoined": rejoined,
        "settled_s": settled}}


def judge_window(session: MigrationSession) -> dict:
    """The window's verdict (verdict.json), and every rebalance callback recorded so far in events.jsonl."""
    if session.span is None:
        raise MigrationError("the window's verdict needs the window first")
    events = list(session.fleet.recorder.events)
    judged = window_verdict(session.spec, events, session.span, session.disturbances, session.observations)
    write_jsonl(session.out_dir / "events.jsonl", [event.to_dict() for event in events])
    return judged


def chosen_action(action: Action, verdict: str) -> str:
    """`promote` or `rollback`: the person's choice, or with `auto` promote on PROMOTE and roll back otherwise."""
    if action != "auto":
        return action
    return "promote" if verdict == PROMOTE else "rollback"


def act(session: MigrationSession, action: str) -> dict:
    """Promote or roll back while the traffic goes on; the result names the action."""
    done = promote(session.fleet) if action == "promote" else rollback(session.fleet)
    return {**done, "name": action}


def verify_promised(session: MigrationSession, action: str) -> dict:
    """Stops the traffic, then verifies every instance on the protocol the action promised."""
    session.stop_traffic()
    want = promised_protocol(action)
    return verify(session.fleet, {name: want for name in sorted(session.spec.names)})


def write_json(path: Path, data: object) -> None:
    path.write_text(json.dumps(data, indent=2))


def write_jsonl(path: Path, lines: list[dict]) -> None:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
