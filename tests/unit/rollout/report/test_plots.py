"""The whole rollout's picture: per lane and 10 s bucket, the e2e p99 and the failed share; drawn once the run is at
rest, again only when a probe wrote since; shown in the report with its alt text."""

from __future__ import annotations

import math
import os

from canary.observations import BrokerReading, Observation
from canary.rollout.core.audit import AuditLog
from canary.rollout.core.run import RunState
from canary.rollout.report import write_report
from canary.rollout.report.plots import BROKER_METRIC, PLOT, broker_series, draw, series


def _obs(lane: str, send: float, e2e: float | None, outcome: str = "delivered", n: int = 0) -> Observation:
    return Observation(run_id="p", kind="probe", source="s", topic="t", partition=0, leader=1, lane=lane,
                       producer_id="p", message_id=f"{lane}-{send}-{n}", seq=n, send_ts=send,
                       ack_ts=send + 1 if outcome != "produce_error" else None,
                       receive_ts=None if e2e is None else send + e2e, outcome=outcome)


def test_series_per_lane_and_bucket():
    start = 1_000_000.0
    observations = [_obs("canary", start + 1_000 + i, float(i + 1), n=i) for i in range(100)]
    observations += [_obs("canary", start + 12_000, None, "lost"), _obs("baseline", start + 3_000, 5.0)]
    lanes = series(observations, start)
    assert lanes["canary"]["t"] == [0, 10] and lanes["canary"]["p99"][0] == 99.0
    assert math.isnan(lanes["canary"]["p99"][1]) and lanes["canary"]["failed"] == [0.0, 100.0]
    assert lanes["baseline"] == {"t": [0], "p99": [5.0], "failed": [0.0]}
    readings = [BrokerReading(run_id="p", source="s", broker=b, lane="baseline", metric=BROKER_METRIC,
                              value=float(b), ts=start + 11_000) for b in (1, 3)]
    assert broker_series(readings, start) == {"baseline": {"t": [10], "mean": [2.0]}}


def test_drawn_at_rest_again_only_after_new_observations_and_shown_in_the_report(tmp_path):
    state = RunState.open(tmp_path / "run", "r1", {"change": {"config": {"a.b": "1"}}})
    start = state.record.created_ms
    state.step_started("preflight")
    state.step_finished("preflight", {})
    probe = tmp_path / "run" / "observations-preflight-1.jsonl"
    readings = [BrokerReading(run_id="p", source="s", broker=b, lane="canary" if b == 1 else "baseline",
                              metric=BROKER_METRIC, value=2.0 + b, ts=start + 1_000 * i)
                for i in range(20) for b in (1, 2)]
    probe.write_bytes(b"\n".join([_obs(lane, start + 500 * i, 3.0 + (lane == "canary") * i, n=i).to_json()
                                  for i in range(40) for lane in ("canary", "baseline")]
                                 + [r.to_json() for r in readings]) + b"\n")
    assert draw(state.record, state.run_dir) is None  # still under way: not drawn yet
    state.update(status="verified rolled_back")
    picture = draw(state.record, state.run_dir)
    assert picture == tmp_path / "run" / PLOT and picture.read_bytes().startswith(b"\x89PNG")
    drawn = picture.stat().st_mtime
    os.utime(probe, (drawn - 10, drawn - 10))
    assert draw(state.record, state.run_dir).stat().st_mtime == drawn  # nothing new: not drawn again
    page = write_report(state, AuditLog(tmp_path / "run", "r1")).read_text()
    assert f'<img src="{PLOT}" alt="The probe over the whole rollout' in page
