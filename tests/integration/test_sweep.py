"""The health sweep on real brokers: two sweeps of the shared cluster in a row. The first is judged by the SLO guards
alone, the second is compared with the first; both are kept in the history (the Spark job's row schema), each with
its result, report and trend. The history is on a real S3 server and each sweep runs from its own work directory,
as sweeps on two Airflow workers do: the second finds the first's history only through the store."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from canary.sweep import HEALTHY, HistoryStore, SweepConfig, run_sweep

pytestmark = pytest.mark.integration

# The suite runs on a saturated shared 2-core machine, where one sweep's latency tail can be seconds and the next
# one's milliseconds (the rollout tests and the demo loosen their floors for the same reason). These floors keep
# the comparison honest about what this test checks, the machinery on real brokers; the statistics themselves are
# tested on synthetic sweeps with known answers in tests/unit/test_sweep_judging.py.
_LATENCY = {"rel_floor": 3.0, "abs_floor": 1000.0}
SATURATED_MACHINE = {"metrics": {
    "e2e_latency_p50": _LATENCY, "e2e_latency_p95": _LATENCY, "produce_latency_p99": _LATENCY,
    "e2e_latency_p99": _LATENCY | {"slo": None},
    "produce_error_rate": {"abs_floor": 0.05}, "availability": {"abs_floor": 0.05, "slo": 0.25}}}


def test_two_sweeps_in_a_row_keep_history_and_compare(shared_cluster, s3_env, tmp_path, monkeypatch):
    history = f"s3://{s3_env.make_bucket('sweep-history')}/history"
    config = SweepConfig(bootstrap_servers=shared_cluster.bootstrap_servers, cluster_name="shared", duration=15,
                         rate=50, judge=SATURATED_MACHINE, history=history)
    monkeypatch.setenv("KAFKA_CANARY_WORKDIR", str(tmp_path / "worker-1"))
    first = run_sweep(config)
    monkeypatch.setenv("KAFKA_CANARY_WORKDIR", str(tmp_path / "worker-2"))
    second = run_sweep(config)
    print(f"\nsweep wall time: first {first.seconds}s, second {second.seconds}s (15 s of probe traffic each)")

    assert first.verdict == HEALTHY, first.reason
    assert first.first_sweep and first.reference_sweeps == 0
    assert "judged by the SLO guards only" in first.reason
    assert second.verdict == HEALTHY, second.reason
    assert not second.first_sweep and second.reference_sweeps == 1
    assert second.reason.startswith("no regression against the last healthy sweep")

    assert second.history == f"{history}/shared"
    monkeypatch.setenv("KAFKA_CANARY_WORKDIR", str(tmp_path / "reader"))  # what a third machine finds in the store
    remote = config.history_store()
    remote.pull(remote.workdir())
    store = HistoryStore(remote.workdir())
    entries = store.entries()
    assert [e.sweep_id for e in entries] == [first.sweep_id, second.sweep_id]
    assert [e.verdict for e in entries] == [HEALTHY, HEALTHY]
    assert entries[1].meta["reference"] == [first.sweep_id]
    # Real probe traffic in the Spark job's history rows: 3 partitions (one per broker), outcomes and latencies.
    rows = pq.read_table(entries[1].path).to_pylist()
    assert {r["run"] for r in rows} == {second.sweep_id}
    assert {r["metric"] for r in rows} >= {"outcome.delivered", "partition", "e2e_latency_ms", "produce_latency_ms"}
    partitions = {p for r in rows if r["metric"] == "partition" for p, _ in r["histogram"]}
    assert partitions == {0, 1, 2}
    assert second.summary["observations"] >= 3 * 50 * 5  # at least one full 5 s bucket on every partition

    result = json.loads(Path(second.result_file).read_text())
    assert result["reference"] == [first.sweep_id]
    assert result["comparison"]["verdict"] == "PROMOTE"
    decided = {m["name"]: m["decision"] for m in result["comparison"]["metrics"]}
    assert decided["e2e_latency_p99"] == decided["availability"] == decided["throughput"] == "PASS"
    assert result["comparison"]["lanes"]["canary"]["partitions"] == 3
    assert result["comparison"]["lanes"]["baseline"]["partitions"] == 3  # the first sweep's, renumbered
    out = store.reports / second.sweep_id
    assert (out / "result.json").read_bytes() == Path(second.result_file).read_bytes()
    for name in ("report.html", "trend.json", "trend.png", "comparison/report.html"):
        assert (out / name).exists(), name
    assert [p["sweep_id"] for p in json.loads((out / "trend.json").read_text())["sweeps"]] == [
        first.sweep_id, second.sweep_id]
