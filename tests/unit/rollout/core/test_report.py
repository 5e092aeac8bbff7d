"""The run report shows the verdict with its reason and, for a broker rollout, the traffic the verdict judged."""

from canary.rollout.core.audit import AuditLog
from canary.rollout.core.report import write_report
from canary.rollout.core.run import RunState


def test_the_report_says_what_traffic_the_verdict_judged(tmp_path):
    state = RunState.open(tmp_path / "run", "r1", {"change": {"config": {"a.b": "1"}}})
    judged = "the canary carries 0.95–1.05× a baseline broker's client traffic (300.0 kB/s in, 150.0/s produce …)"
    state.update(verdict={"verdict": "PROMOTE", "reason": "no regression <here>", "traffic": {"reason": judged}},
                 status="judged PROMOTE")
    page = write_report(state, AuditLog(tmp_path / "run", "r1")).read_text()
    assert "<b>Traffic judged:</b> the canary carries 0.95–1.05× a baseline broker&#x27;s client traffic" in page
    assert "no regression &lt;here&gt;" in page  # escaped like every value


def test_a_verdict_without_traffic_shows_no_traffic_line(tmp_path):
    state = RunState.open(tmp_path / "run", "r2", {"change": {"config": {"a.b": "1"}}})
    state.update(verdict={"verdict": "ROLLBACK", "reason": "deploy-canary failed"}, status="judged ROLLBACK")
    assert "Traffic judged" not in write_report(state, AuditLog(tmp_path / "run", "r2")).read_text()


def test_the_audit_log_shows_times_a_person_reads(tmp_path):
    state = RunState.open(tmp_path / "run", "r3", {"change": {"config": {"a.b": "1"}}})
    audit = AuditLog(tmp_path / "run", "r3")
    audit.record("preflight", "lock taken")
    page = write_report(state, audit).read_text()
    entry = next(e for e in audit.entries() if e["action"] == "lock taken")
    assert "<th>time (UTC, since the run began)</th>" in page
    assert "Z (+" in page and str(entry["ts_ms"]) not in page  # no epoch milliseconds
