"""The analysis job with spark-submit on a real probe run's observations, read from the real observations
topic by time range (Spark's Kafka source, its jars resolved from Maven Central)."""

from __future__ import annotations

import collections
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from canary.probe.config import ProbeConfig
from canary.probe.runner import Probe

pytestmark = pytest.mark.integration


@pytest.mark.slow  # ~1 min: make faults (CI's time)
def test_analyze_reads_a_probe_run_from_the_observations_topic(shared_cluster, tmp_path):
    obs_file = tmp_path / "observations.jsonl"
    start_ms = int(time.time() * 1000)
    probe = Probe(ProbeConfig(shared_cluster.bootstrap_servers, topic="analysis-canary", rate=10, duration=25,
                              run_id="analysis-run", producer_id="analysis-probe", observations_file=str(obs_file)))
    probe.run()
    end_ms = int(time.time() * 1000) + 1
    written = [json.loads(line) for line in obs_file.read_text().splitlines()]
    assert written, "the probe wrote no observations"
    per_lane = collections.Counter(o["lane"] for o in written)

    config = tmp_path / "judge.yaml"
    # Count every observation of this short run (no warm-up); the probe's first seconds are slow (consumer
    # start-up), so the absolute p99 guard is off here: this test is about reading and counting.
    config.write_text("warmup_s: 0\nmin_buckets: 1\nmetrics:\n  e2e_latency_p99: {slo: null}\n")
    out = tmp_path / "out"
    cli = Path(sys.executable).parent / "kafka-canary"
    proc = subprocess.run([str(cli), "analyze", "--observations", f"kafka://{shared_cluster.bootstrap_servers}",
                           "--from", str(start_ms), "--to", str(end_ms), "--run-id", "analysis-run",
                           "--out", str(out), "--config", str(config)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode in (0, 1, 3), proc.stdout[-3000:] + proc.stderr[-3000:]
    verdict = json.loads((out / "verdict.json").read_text())
    assert {lane: v["observations"] for lane, v in verdict["lanes"].items() if v["observations"]} == dict(per_lane)
    # Without a canary broker every partition is in the baseline lane: named, and never a pass.
    if "canary" not in per_lane:
        assert proc.returncode == 3, verdict["reason"]
        assert verdict["data_quality"]["empty_lanes"] == ["canary"]
    assert (out / "report.html").exists() and (out / "aggregates.parquet").is_dir()
