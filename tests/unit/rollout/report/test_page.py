"""The run report shows the verdict with its reason and, for a broker rollout, the traffic the verdict judged and
the metrics it could not; the steps to scale; what changed on each broker; the evidence; a readable audit log;
what started the run and each step's Airflow task log; table headers and the page's language."""

import json

from canary.rollout.broker.record import BrokerRunRecord
from canary.rollout.broker.report import BROKER_REPORT
from canary.rollout.client.record import ClientRunRecord
from canary.rollout.client.report import CLIENT_REPORT
from canary.rollout.core.audit import AuditLog
from canary.rollout.core.record import Origin
from canary.rollout.core.run import RunState
from canary.rollout.report import write_report


def test_the_report_says_what_traffic_the_verdict_judged(tmp_path):
    state = RunState.open(tmp_path / "run", "r1", {"change": {"config": {"a.b": "1"}}})
    judged = "the canary carries 0.95–1.05× a baseline broker's client traffic (300.0 kB/s in, 150.0/s produce …)"
    reads = {"rounds": 22, "read_mb": 101.3, "max_bytes_per_partition": 2097152, "partitions_per_broker": 2}
    state.update(verdict={"verdict": "PROMOTE", "reason": "no regression <here>",
                          "traffic": {"reason": judged, "catch_up_reads": reads}}, status="judged PROMOTE")
    page = write_report(state, AuditLog(tmp_path / "run", "r1")).read_text()
    assert "<b>Traffic judged:</b> the canary carries 0.95–1.05× a baseline broker&#x27;s client traffic" in page
    assert "Catch-up reads: 101.3 MB of the user topics read back in 22 rounds." in page
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
    assert "Times in UTC, with the time since the run began" in page
    assert "Z (+" in page and str(entry["ts_ms"]) not in page  # no epoch milliseconds


BROKER = {"version": "3.9.2", "config": {}, "rack": None}


def test_a_rolled_back_run_shows_what_changed_each_step_and_that_the_snapshot_is_back(tmp_path):
    state = RunState.open(tmp_path / "run", "r4", {"change": {"config": {"num.io.threads": "6"}}},
                          record=BrokerRunRecord)
    audit = AuditLog(tmp_path / "run", "r4")
    for step in ("preflight", "deploy-canary", "probe-window", "rollback"):
        state.step_started(step)
        state.step_finished(step, {})
    changed = BROKER | {"config": {"num.io.threads": "6"}, "rack": "canary-broker"}
    audit.record("deploy-canary", "restart broker", broker=2, before=BROKER, after=changed)
    audit.record("probe-window", "interim look", verdict="INCONCLUSIVE")
    audit.record("rollback", "restart broker", broker=2, before=changed, after=BROKER)
    audit.record("rollback", "probe during the rolls", probe_run_id="r4-rollback", sent=577, acked=577, lost=0)
    (tmp_path / "run" / "analysis-1").mkdir()
    (tmp_path / "run" / "analysis-1" / "verdict.json").write_text(json.dumps({"metrics": [
        {"name": "e2e_latency_p99", "decision": "FAIL", "reason": "canary p99 472 ms vs 210 ms",
         "canary": {"value": 472.3, "unit": "ms"}, "baseline": {"value": 209.7, "unit": "ms"},
         "effect": {"relative": 1.25, "relative_interval": [0.9, 1.6]}},
        {"name": "dropped_rate", "decision": "NO_DATA", "reason": "no observations"}]}))
    state.update(before={"brokers": {"1": BROKER | {"id": 1}, "2": BROKER | {"id": 2}},
                         "controllers": {"3000": {"id": 3000, "version": "3.9.2"}},
                         "features": {"metadata.version": 21}},
                 canary_brokers=[2], status="verified rolled_back",
                 verdict={"verdict": "ROLLBACK", "reason": "e2e p99", "analysis": "analysis-1"})
    page = write_report(state, audit, BROKER_REPORT).read_text()
    assert '<span class="changed">num.io.threads: — → 6 → —</span>' in page  # the canary's path, marked
    assert page.count("✓ restored = snapshot") == 2 and "✗ differs" not in page
    assert "<b>Not judged (no data):</b> dropped_rate" in page
    assert "+125.0% [+90.0%, +160.0%]" in page and "<td class='FAIL'>FAIL</td>" in page
    assert '<svg role="img" aria-label="4 steps over' in page and "1 interim look(s)" in page
    assert "<td>rollback</td><td>r4-rollback</td><td>577</td><td>577</td><td>0</td>" in page
    assert "metadata.version: 21 → 21" in page


def test_a_promoted_run_not_yet_finalized_says_what_is_still_reversible(tmp_path):
    state = RunState.open(tmp_path / "run", "r5", {"change": {"version": "4.1.2"}}, record=BrokerRunRecord)
    state.step_started("promote")
    state.step_finished("promote", {"finalize": "after the bake, from 2026-11-27T10:20:00Z: `kafka-canary rollout "
                                                "finalize`"})
    state.update(before={"brokers": {"1": BROKER | {"id": 1}}, "features": {"metadata.version": 21}}, status="promoted",
                 verdict={"verdict": "PROMOTE", "reason": "no regression"})
    page = write_report(state, AuditLog(tmp_path / "run", "r5"), BROKER_REPORT).read_text()
    assert "<b>Still reversible:</b>" in page and "metadata.version 21" in page and "10:20:00Z" in page
    state.step_started("verify")
    state.step_finished("verify", {"finalized": {"metadata.version": 21}})
    assert "metadata.version: 21 → 21" in write_report(state, AuditLog(tmp_path / "run", "r5"), BROKER_REPORT
                                                       ).read_text()
    state.step_started("finalize")
    state.step_finished("finalize", {"finalized": {"metadata.version": [21, 27]}})
    page = write_report(state, AuditLog(tmp_path / "run", "r5"), BROKER_REPORT).read_text()
    # finalize runs after verify: the levels it raised are the ones shown
    assert "Still reversible" not in page and "metadata.version: 21 → 27" in page


def test_a_client_rollout_shows_each_instance_version_path_and_that_the_fleet_is_back(tmp_path):
    state = RunState.open(tmp_path / "run", "r6", {"service": {"name": "billing"}, "from_version": "1.0",
                                                   "to_version": "2.0"}, record=ClientRunRecord)
    audit = AuditLog(tmp_path / "run", "r6")
    audit.record("deploy-canary", "start instance", instance="billing-consumer-0-canary", role="consumer",
                 lane="canary", version="2.0", was=None)
    audit.record("rollback", "stop instance", instance="billing-consumer-0-canary", role="consumer", was_running=True)
    state.update(before={"topic": "orders", "canary_brokers": [3], "replicas": {"0": [1, 2, 3], "1": [2, 1, 3]},
                         "lane": {"0": [3, 1, 2], "1": [3, 2, 1]}, "instances": [
        {"name": "billing-consumer-0", "role": "consumer", "lane": "baseline", "version": "1.0", "running": True}]},
                 status="verified rolled_back", verdict={"verdict": "ROLLBACK", "reason": "dropped_rate"})
    page = write_report(state, AuditLog(tmp_path / "run", "r6"), CLIENT_REPORT).read_text()
    assert "<span class=\"changed\">— → 2.0 → stopped</span>" in page  # the canary, started and stopped
    assert "<th scope='row'>billing-consumer-0</th><td>baseline</td><td>1.0</td><td>✓ as before</td>" in page
    assert page.count("✓ as before") == 2 and "partitions 0, 1 of orders" in page


def test_a_dag_run_s_report_says_who_started_it_and_links_each_step_to_its_task_log(tmp_path):
    state = RunState.open(tmp_path / "run", "r7", {"change": {"config": {"a.b": "1"}}})
    state.started_by(Origin(trigger="release", by="ci-bot", dag_id="kafka_broker_canary",
                            airflow_run_id="rel:1 +x"))
    since = state.record.created_ms
    state.step_started("preflight")
    state.ran_in("preflight", since)
    state.step_started("deploy-canary")  # its task has not said so yet (a crash before it could): no link
    page = write_report(state, AuditLog(tmp_path / "run", "r7")).read_text()
    assert "<b>Started by</b> the release pipeline, by ci-bot" in page
    assert '<a href="/dags/kafka_broker_canary/runs/rel%3A1%20%2Bx">its DAG run in Airflow</a>' in page
    assert '<a href="/dags/kafka_broker_canary/runs/rel%3A1%20%2Bx/tasks/preflight">preflight</a>' in page
    assert page.count("/tasks/") == 1


def test_every_table_has_headers_and_the_page_names_its_language(tmp_path):
    state = RunState.open(tmp_path / "run", "r8", {"change": {"config": {"a.b": "1"}}})
    state.step_started("preflight")
    audit = AuditLog(tmp_path / "run", "r8")
    audit.record("preflight", "probe", sent=10, acknowledged=10, lost=0)
    page = write_report(state, audit).read_text()
    assert page.startswith('<!doctype html><html lang="en">') and "<h1>" in page
    tables = page.split("<table")[1:]
    assert tables and all("<th" in table.split("</table>")[0] for table in tables)


def test_the_timeline_names_a_fault_injected_into_the_canary_lane(tmp_path):
    state = RunState.open(tmp_path / "run", "r9", {"change": {"config": {"a.b": "1"}},
                                                   "fault": {"client_delay_ms": 250.0, "drop": 0}})
    state.step_started("preflight")
    page = write_report(state, AuditLog(tmp_path / "run", "r9")).read_text()
    assert "a fault injected into the canary lane throughout (client_delay_ms 250.0)" in page


def test_a_promotion_in_waves_shows_each_wave_its_look_the_drain_and_the_pauses(tmp_path):
    state = RunState.open(tmp_path / "run", "r9", {"change": {"config": {"num.io.threads": "6"}}},
                          record=BrokerRunRecord)
    audit = AuditLog(tmp_path / "run", "r9")
    audit.record("promote", "promotion plan", batches=[], waves=[
        {"wave": 1, "batches": [[1], [3, 4]]}, {"wave": 2, "batches": [[5, 6]]}, {"wave": 3, "batches": [[2]]}],
        notes=["broker 4 is down: started first, alone (starting it takes nothing from any ISR)"])
    audit.record("promote", "drained", brokers=[3, 4], drained=7, still_leading=[])
    audit.record("promote", "wave look", wave=1, verdict="PROMOTE", reason="no regression")
    audit.record("pause", "paused", by="alice", reason="SLO <red>")
    audit.record("promote", "wave look", wave=2, control=2, verdict="ROLLBACK", reason="e2e_latency_p99: 480 vs 12 ms")
    page = write_report(state, audit, BROKER_REPORT).read_text()
    assert "<h2>Promotion</h2>" in page
    assert "<td>1, 3, 4</td><td>[1] · [3, 4]</td><td>passed: no regression</td>" in page
    assert ("<td>regression (against control broker 2, restarted unchanged): e2e_latency_p99: 480 vs 12 ms</td>"
            in page and "none (the last wave)" in page)
    assert "7 partition leadership(s) moved off batches" in page and "paused by alice (SLO &lt;red&gt;)" in page
    assert "<p>the plan: broker 4 is down: started first, alone" in page
