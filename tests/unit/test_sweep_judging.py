"""The health sweep's logic on synthetic sweeps with known answers: the comparison against the pooled history and
the SLO guards, the history store, the reference selection, the trend, alerts, and one whole sweep with a fake
probe (the real probe runs in tests/integration/test_sweep.py)."""

from __future__ import annotations

import json
import logging
import random
import threading
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

from canary.errors import CanaryError
from canary.judge import Aggregates, judge
from canary.judge.alpha import SLO_SHARE
from canary.observations import Observation
from canary.sweep import (
    DEGRADED,
    HEALTHY,
    HISTORY_ENV,
    WEBHOOK_ENV,
    Alert,
    HistoryEntry,
    HistoryStore,
    SweepBrief,
    SweepConfig,
    SweepError,
    SweepRecord,
    rows_of,
    run_sweep,
    send_alert,
    sweep_judge_config,
)
from canary.sweep import cli as sweep_cli
from canary.sweep import run as sweep_run
from canary.sweep.compare import (
    comparison_aggregates,
    comparison_config,
    guard_aggregates,
    guard_config,
    select_reference,
)
from canary.sweep.decide import decide, relabel
from canary.sweep.summary import sweep_summary
from canary.sweep.trend import plot_trend, trend

T0 = 1_800_000_001_234  # not on a bucket boundary: the first and last buckets of a sweep are partial
HOUR = 3_600_000


def observations(start_ms: int = T0, seconds: float = 30, rate: float = 20, partitions: int = 3,
                 latency_ms: float = 5.0, error_share: float = 0.0, lost: tuple[int, ...] = (), seed: int = 1,
                 lane: str = "baseline") -> list[Observation]:
    """One probe run: `rate` messages per second to each partition, log-normal latencies around `latency_ms`,
    a share of produce errors, the messages with sequence numbers in `lost` lost (on partition 1)."""
    rng = random.Random(seed)
    out = []
    for p in range(partitions):
        for seq in range(int(seconds * rate)):
            send = start_ms + int(seq * 1000 / rate) + p
            common = dict(run_id="r", kind="probe", source="s", topic="t", partition=p, leader=p, lane=lane,
                          producer_id="pid", message_id=f"{p}-{seq}", seq=seq, send_ts=send)
            if rng.random() < error_share:
                out.append(Observation(**common, ack_ts=None, receive_ts=None, outcome="produce_error"))
                continue
            latency = rng.lognormvariate(0, 0.4) * latency_ms
            ack = send + max(1, int(latency * 0.6))
            if p == 1 and seq in lost:
                out.append(Observation(**common, ack_ts=ack, receive_ts=None, outcome="lost"))
            else:
                out.append(Observation(**common, ack_ts=ack, receive_ts=send + max(1, int(latency)),
                                       outcome="delivered"))
    return out


def record(sweep_id: str, obs: list[Observation], verdict: str | None = HEALTHY, **meta) -> SweepRecord:
    agg = Aggregates.from_observations(obs, 5000)
    sends = [o.send_ts for o in obs]
    return SweepRecord(sweep_id, rows_of(agg), {
        "sweep_id": sweep_id, "bucket_ms": 5000, "first_send_ms": min(sends), "last_send_ms": max(sends),
        "started_ms": min(sends), "rate": 20, "message_size": 200, "verdict": verdict} | meta)


def history(n: int = 3, **kw) -> list[SweepRecord]:
    return [record(f"ref{k}", observations(T0 + k * HOUR, seed=k, **kw)) for k in range(n)]


def sweep_verdict(current: SweepRecord, reference: list[SweepRecord], judge_config=None) -> tuple[str, str]:
    """What run_sweep decides for `current` against `reference` (the same calls, without the probe)."""
    config = sweep_judge_config(judge_config)
    guards = judge(guard_aggregates(current), guard_config(config))
    comparison = judge(comparison_aggregates(current, reference), comparison_config(config)) if reference else None
    return decide(guards, comparison, len(reference), len(reference))


NOW = T0 + 10 * HOUR


# ----- the verdict -----

def test_a_sweep_like_its_history_is_healthy():
    verdict, reason = sweep_verdict(record("now", observations(NOW, seed=99)), history())
    assert verdict == HEALTHY, reason
    assert reason.startswith("no regression against the last 3 healthy sweep(s)")
    assert "within every SLO guard" in reason


def test_a_latency_regression_against_the_history_is_degraded():
    verdict, reason = sweep_verdict(record("now", observations(NOW, seed=99, latency_ms=60)), history())
    assert verdict == DEGRADED
    assert reason.startswith("worse than the last 3 healthy sweep(s)") and "e2e_latency_p99" in reason
    assert "this sweep p99" in reason and "vs reference" in reason  # the judge's lane words relabelled
    # Within the SLO guards: only the comparison with the history sees it.
    assert sweep_verdict(record("now", observations(NOW, seed=99, latency_ms=60)), [])[0] == HEALTHY


def test_a_small_drift_within_the_sweep_floors_is_healthy():
    # 40 % slower: beyond the rollout gate's default 10 % floor, within the sweep's (p99 doubled and +25 ms).
    verdict, reason = sweep_verdict(record("now", observations(NOW, seed=99, latency_ms=7)), history())
    assert verdict == HEALTHY, reason


def test_produce_errors_breach_the_availability_guard():
    verdict, reason = sweep_verdict(record("now", observations(NOW, seed=99, error_share=0.05)), history())
    assert verdict == DEGRADED
    assert reason.startswith("SLO breached: availability:") and "guard failure share <= 1 %" in reason


def test_lost_messages_against_a_lossless_history_are_degraded():
    verdict, reason = sweep_verdict(record("now", observations(NOW, seed=99, lost=(100, 101, 102))), history())
    assert verdict == DEGRADED
    assert "loss_rate" in reason and "tolerance" in reason


def test_the_first_sweep_is_judged_by_the_slo_guards_alone_and_says_so():
    verdict, reason = sweep_verdict(record("now", observations(NOW, seed=99)), [])
    assert verdict == HEALTHY
    assert reason.startswith("first sweep of this cluster: no history to compare with yet; judged by the SLO "
                             "guards only: within every guard (e2e_latency_p99, loss_rate, availability)")
    # A history without an eligible sweep is not a first sweep, and the reason says that instead.
    config = sweep_judge_config()
    guards = judge(guard_aggregates(record("now", observations(NOW))), guard_config(config))
    assert decide(guards, None, 0, 4)[1].startswith("no earlier healthy sweep with these probe settings to "
                                                      "compare with (4 sweep(s) in the history)")
    slow = record("now", observations(NOW, seed=99, latency_ms=1500))
    verdict, reason = sweep_verdict(slow, [])
    assert verdict == DEGRADED and reason.startswith("SLO breached: e2e_latency_p99:")


def test_a_breach_in_the_history_does_not_fail_this_sweep():
    # The reference had seconds of latency (beyond the p99 guard); this sweep is fast. The guards judge this sweep
    # alone, the comparison finds it better: healthy.
    verdict, reason = sweep_verdict(record("now", observations(NOW, seed=99)), history(latency_ms=1500))
    assert verdict == HEALTHY, reason


def test_too_little_data_is_inconclusive():
    verdict, reason = sweep_verdict(record("now", observations(NOW, seed=99, rate=2)), history(rate=2))
    assert verdict == "INCONCLUSIVE"
    assert "not enough data" in reason


def test_judge_config_overrides_merge_over_the_sweep_defaults(tmp_path):
    config = sweep_judge_config({"alpha": 0.05, "metrics": {"e2e_latency_p99": {"slo": 500}}})
    p99 = config.metrics["e2e_latency_p99"]
    assert (config.alpha, config.warmup_s, config.bucket_s) == (0.05, 0, 5)
    assert (p99.slo, p99.rel_floor, p99.abs_floor) == (500, 1.0, 25.0)  # the sweep's floors stay
    path = tmp_path / "judge.yaml"
    path.write_text("metrics:\n  availability: {slo: 0.05}\n")
    assert sweep_judge_config(path).metrics["availability"].slo == 0.05
    with pytest.raises(CanaryError, match="alpha"):
        sweep_judge_config({"alpha": 2})
    with pytest.raises(CanaryError, match="metrics.availability: Input should be a valid dictionary"):
        sweep_judge_config({"metrics": {"availability": 0.05}})


def test_comparison_and_guards_split_alpha():
    config = sweep_judge_config()
    assert comparison_config(config).alpha == pytest.approx(config.alpha * (1 - SLO_SHARE))
    assert all(m.slo is None for m in comparison_config(config).metrics.values())
    assert list(guard_config(config).metrics) == ["e2e_latency_p99", "loss_rate", "availability"]
    none = sweep_judge_config({"metrics": {n: {"slo": None} for n in ("e2e_latency_p99", "loss_rate",
                                                                       "availability")}})
    assert guard_config(none) is None
    assert decide(None, None, 0)[0] == "INCONCLUSIVE"


# ----- how the two sides are built -----

def test_full_buckets_leave_out_the_partial_first_and_last():
    r = record("a", observations(T0, seconds=30))  # sends from T0 (…1_234) to T0 + 29.95 s
    first = (T0 // 5000 + 1) * 5000
    assert r.full_buckets() == [first + k * 5000 for k in range(5)]
    assert r.buckets()[0] < first and r.buckets()[-1] == first + 5 * 5000
    assert {row[1] for row in r.judged_rows()} == set(r.full_buckets())
    foreign = SweepRecord("spark", r.rows, {"bucket_ms": 5000})  # no send window: both ends left out
    assert foreign.full_buckets() == r.buckets()[1:-1]


def test_comparison_aligns_full_buckets_and_counts_each_reference_sweeps_partitions():
    current = record("now", observations(NOW, seed=9))
    reference = history(3)
    agg = comparison_aggregates(current, reference)
    assert agg.buckets() == current.full_buckets()  # this sweep's times, the reference laid onto them
    b = agg.buckets()[0]
    assert sum(agg.outcomes("baseline", b).values()) == 3 * sum(agg.outcomes("canary", b).values())
    assert len(agg.hist("canary", "partition", b)) == 3
    assert len(agg.hist("baseline", "partition", b)) == 9  # 3 partitions × 3 pooled sweeps: the exposure
    throughput = {m["name"]: m for m in judge(agg, comparison_config(sweep_judge_config()))["metrics"]}[
        "throughput"]
    assert throughput["canary"]["value"] == pytest.approx(throughput["baseline"]["value"])
    # Both lanes of a sweep are one side (a rollout's canary brokers are part of the cluster's health).
    mixed = record("now", observations(NOW, seed=9, lane="canary") + observations(NOW, seed=8, partitions=1))
    assert set(comparison_aggregates(mixed, reference).cells) <= {("canary", m) for _, m in agg.cells} | \
        {("baseline", m) for _, m in agg.cells}


def test_guard_aggregates_put_this_sweep_in_both_lanes():
    current = record("now", observations(NOW, seed=9))
    agg = guard_aggregates(current)
    assert agg.buckets() == current.full_buckets()
    for b in agg.buckets():
        assert agg.outcomes("canary", b) == agg.outcomes("baseline", b)


def test_relabel():
    assert relabel("canary p99 3 ms vs baseline 2 ms; beyond the baseline's by the floors; canary's") == \
        "this sweep p99 3 ms vs reference 2 ms; beyond the reference's by the floors; this sweep's"


# ----- history -----

def test_history_round_trip_in_the_spark_jobs_row_schema(tmp_path):
    import pyarrow.parquet as pq

    store = HistoryStore(tmp_path / "c1")
    obs = observations(T0, seed=3)
    agg = Aggregates.from_observations(obs, 5000, {"malformed": 2})
    rec = SweepRecord("20270115T080000Z-aaaaaa", rows_of(agg), {"sweep_id": "20270115T080000Z-aaaaaa",
                                                                      "started_ms": T0, "bucket_ms": 5000,
                                                                      "verdict": HEALTHY})
    path = store.append(rec)
    assert path == tmp_path / "c1" / "20270115T080000Z-aaaaaa.parquet"
    assert not list((tmp_path / "c1").glob(".*"))  # no temporary file left
    schema = pq.read_schema(path)
    histogram = schema.field("histogram").type
    assert [(f.name, str(f.type)) for f in schema if f.name != "histogram"] == [
        ("lane", "string"), ("metric", "string"), ("bucket_start_ms", "int64"), ("count", "int64"), ("run", "string")]
    assert (str(histogram.key_type), str(histogram.item_type)) == ("int32", "int64")
    table = pq.read_table(path).to_pylist()
    assert {row["run"] for row in table} == {rec.sweep_id}
    assert all(row["count"] == sum(c for _, c in row["histogram"]) for row in table)
    (entry,) = store.entries()
    assert entry.meta["verdict"] == HEALTHY and entry.sweep_id == rec.sweep_id
    loaded = store.load(entry)
    assert sorted(loaded.rows) == sorted(r for r in rec.rows if r[0] != "_bad")  # excluded rows are not history
    assert Aggregates.from_rows(loaded.rows, 5000).cells == Aggregates.from_observations(obs, 5000).cells


def test_entries_are_oldest_first_and_prune_keeps_the_newest(tmp_path):
    store = HistoryStore(tmp_path)
    for k in (2, 0, 1, 3):
        sweep_id = f"2027011{k}T000000Z-00000{k}"
        store.append(SweepRecord(sweep_id, [("baseline", 0, "outcome.delivered", 0, 1)],
                                   {"sweep_id": sweep_id, "started_ms": k, "bucket_ms": 5000}))
        (store.reports / sweep_id).mkdir(parents=True)
    (tmp_path / "broken.parquet").write_text("not parquet")
    assert [e.meta["started_ms"] for e in store.entries()] == [0, 1, 2, 3]
    assert store.prune(2) == ["20270110T000000Z-000000", "20270111T000000Z-000001"]
    assert [e.meta["started_ms"] for e in store.entries()] == [2, 3]
    assert sorted(p.name for p in store.reports.iterdir()) == ["20270112T000000Z-000002", "20270113T000000Z-000003"]


def test_reference_is_the_newest_comparable_healthy_sweeps():
    current = {"sweep_id": "now", "bucket_ms": 5000, "rate": 20, "message_size": 200}

    def entry(name, **meta):
        return HistoryEntry(Path(f"{name}.parquet"), current | {"sweep_id": name, "verdict": HEALTHY} | meta)

    entries = [entry("h1"), entry("h2"), entry("degraded", verdict=DEGRADED), entry("unsure", verdict="INCONCLUSIVE"),
               entry("rollout", during_rollout=True), entry("faster", rate=50), entry("h3"), entry("h4")]
    assert [e.sweep_id for e in select_reference(entries, current, 3)] == ["h2", "h3", "h4"]
    assert [e.sweep_id for e in select_reference(entries, current, 10)] == ["h1", "h2", "h3", "h4"]


# ----- trend, report, alerts -----

def test_trend_lists_the_last_sweeps_and_plots_them(tmp_path):
    store = HistoryStore(tmp_path)
    for k, (latency, verdict) in enumerate([(5, HEALTHY), (50, DEGRADED), (5, HEALTHY)]):
        rec = record(f"s{k}", observations(T0 + k * HOUR, seed=k, latency_ms=latency), verdict=verdict,
                     started_ms=T0 + k * HOUR)
        rec.meta["summary"] = sweep_summary(rec.judged_rows())
        store.append(rec)
    points = trend(store, 2)
    assert [p.sweep_id for p in points] == ["s1", "s2"]
    assert [p.verdict for p in points] == [DEGRADED, HEALTHY]
    assert points[0].figure("e2e_p99_ms") > 5 * points[1].figure("e2e_p99_ms")
    assert points[1].figure("availability") == 1.0 and points[1].figure("error_rate") == 0.0
    assert points[1].figure("observations") == 5 * 5 * 20 * 3  # five full buckets of 5 s, 20 msg/s, 3 partitions
    png = plot_trend(points, tmp_path / "trend.png", "c1")
    assert png.startswith(b"\x89PNG") and (tmp_path / "trend.png").read_bytes() == png


def test_summary_figures():
    rec = record("x", observations(T0, seed=1, error_share=0.1))
    s = sweep_summary(rec.judged_rows())
    assert s["error_rate"] == pytest.approx(0.1, abs=0.03)
    assert s["availability"] == pytest.approx(1 - s["error_rate"])
    assert s["loss_rate"] == 0 and 3 < s["e2e_p50_ms"] < 8


class _Webhook:
    """A local HTTP endpoint that records what is POSTed to it."""

    def __init__(self, status: int = 204):
        received = self.received = []

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                received.append((self.path, json.loads(self.rfile.read(int(self.headers["Content-Length"])))))
                self.send_response(status)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = HTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.server_port}/hooks/SECRET-TOKEN-42"

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def test_alert_is_logged_filed_and_posted_and_the_webhook_url_never_logged(tmp_path, caplog):
    caplog.set_level(logging.INFO)
    hook = _Webhook()
    try:
        alert = Alert("prod-eu", DEGRADED, "SLO breached: availability", "s1", "/r/report.html")
        sent = send_alert(alert, tmp_path, hook.url)
    finally:
        hook.close()
    assert sent == {"alerts_file": str(tmp_path / "alerts.jsonl"), "webhook": "sent"}
    (line,) = (tmp_path / "alerts.jsonl").read_text().splitlines()
    assert json.loads(line) | {"at_ms": 0} == alert.to_dict() | {"at_ms": 0}
    assert hook.received == [("/hooks/SECRET-TOKEN-42", json.loads(line))]
    assert "ALERT kafka-canary DEGRADED: cluster prod-eu: SLO breached: availability" in caplog.text
    assert "SECRET-TOKEN" not in caplog.text


def test_a_failing_webhook_is_reported_not_raised_and_not_logged(tmp_path, caplog):
    hook = _Webhook(status=500)
    try:
        refused = send_alert(Alert("c", "SWEEP_FAILED", "unreachable"), tmp_path, hook.url)
    finally:
        hook.close()
    unreachable = send_alert(Alert("c", "SWEEP_FAILED", "unreachable"), tmp_path, hook.url, timeout=2)
    assert refused["webhook"] == "refused: HTTP 500"
    assert unreachable["webhook"] == "failed: ConnectionError"
    assert len((tmp_path / "alerts.jsonl").read_text().splitlines()) == 2
    assert "SECRET-TOKEN" not in caplog.text and "127.0.0.1" not in caplog.text
    assert send_alert(Alert("c", "DEGRADED", "x"), tmp_path)["webhook"] == "not configured"


# ----- one whole sweep, the probe faked -----

class FakeProbe:
    """Stands in for canary.probe.runner.Probe: writes a synthetic run's observations to the configured file."""

    configs: list = []
    latency_ms = 5.0

    def __init__(self, config):
        self.config = config
        FakeProbe.configs.append(config)

    def run(self):
        import time
        from types import SimpleNamespace

        obs = observations(int(time.time() * 1000) - int(self.config.duration * 1000), seconds=self.config.duration,
                           rate=self.config.rate, latency_ms=FakeProbe.latency_ms, seed=len(FakeProbe.configs))
        with open(self.config.observations_file, "w") as f:
            f.writelines(replace(o, run_id=self.config.run_id).to_json().decode() + "\n" for o in obs)
            f.write("{not json\n")
        return SimpleNamespace(lanes={"baseline": {"sent": len(obs), "acked": len(obs), "lost": 0,
                                                   "produce_errors": 0}},
                               observations={"written": len(obs), "failed": 0, "dropped": 0, "pending": 0})


@pytest.fixture
def fake_probe(monkeypatch):
    import canary.probe.runner

    FakeProbe.configs = []
    FakeProbe.latency_ms = 5.0
    monkeypatch.setattr(canary.probe.runner, "Probe", FakeProbe)
    monkeypatch.setattr(sweep_run, "rollout_holder", lambda config: None)
    return FakeProbe


def test_two_sweeps_keep_history_compare_and_report(tmp_path, fake_probe, monkeypatch):
    monkeypatch.setenv(HISTORY_ENV, str(tmp_path / "history"))
    config = SweepConfig(bootstrap_servers="b:9092", cluster_name="prod/eu 1")
    first = run_sweep(config)
    second = run_sweep(config)

    cluster_dir = tmp_path / "history" / "prod_eu_1"
    assert sorted(p.name for p in cluster_dir.glob("*.parquet")) == sorted(
        [f"{first.sweep_id}.parquet", f"{second.sweep_id}.parquet"])
    assert first.verdict == HEALTHY and first.first_sweep and first.reference_sweeps == 0
    assert "first sweep of this cluster" in first.reason
    assert second.verdict == HEALTHY and not second.first_sweep and second.reference_sweeps == 1
    assert second.reason.startswith("no regression against the last healthy sweep")
    assert "1 observation(s) excluded: malformed 1" in second.reason
    out = Path(second.report).parent
    assert out == cluster_dir / "reports" / second.sweep_id
    for name in ("result.json", "report.html", "trend.json", "trend.png", "comparison/report.html",
                 "comparison/verdict.json"):
        assert (out / name).exists(), name
    assert not (out / "observations.jsonl").exists()
    result = json.loads((out / "result.json").read_text())
    assert result["reference"] == [first.sweep_id] and result["comparison"]["verdict"] == "PROMOTE"
    assert result["excluded"] == {"malformed": 1}
    assert [p["sweep_id"] for p in json.loads((out / "trend.json").read_text())["sweeps"]] == [
        first.sweep_id, second.sweep_id]
    assert (cluster_dir / "trend.png").exists()
    assert "HEALTHY" in (out / "report.html").read_text()
    (probe1, probe2) = fake_probe.configs
    assert probe1.run_id == f"sweep-{first.sweep_id}" and probe1.reconcile and probe1.duration == 30
    assert json.dumps(second.to_dict())  # JSON-able (XCom)

    fake_probe.latency_ms = 80.0
    third = run_sweep(config)
    assert third.verdict == DEGRADED and third.reference_sweeps == 2
    fake_probe.latency_ms = 5.0
    fourth = run_sweep(config)
    assert json.loads(Path(fourth.result_file).read_text())["reference"] == [first.sweep_id,
                                                                                second.sweep_id]


def test_a_sweep_during_a_rollout_only_reads_and_is_never_a_reference(tmp_path, fake_probe, monkeypatch):
    monkeypatch.setattr(sweep_run, "rollout_holder", lambda config: {"run_id": "rollout-7"})
    config = SweepConfig(bootstrap_servers="b:9092", cluster_name="c", history=tmp_path,
                           out=tmp_path / "out", keep_observations=True)
    result = run_sweep(config)
    assert fake_probe.configs[0].reconcile is False
    assert result.during_rollout and (tmp_path / "out" / "observations.jsonl").exists()
    (entry,) = HistoryStore(tmp_path / "c").entries()
    assert select_reference([entry], entry.meta | {"sweep_id": "next"}, 6) == []


def test_bad_settings_fail_before_any_traffic(tmp_path, fake_probe):
    with pytest.raises(SweepError, match="duration"):
        SweepConfig(bootstrap_servers="b:9092", duration=0)
    with pytest.raises(SweepError, match="bootstrap"):
        SweepConfig(bootstrap_servers="")
    with pytest.raises(SweepError, match="cluster name"):
        SweepConfig(bootstrap_servers="b:1", cluster_name="...")
    with pytest.raises(CanaryError, match="alpha"):
        run_sweep(SweepConfig(bootstrap_servers="b:1", judge={"alpha": 3}, history=tmp_path))
    assert fake_probe.configs == []


@pytest.mark.parametrize(("verdict", "code"), [(HEALTHY, 0), (DEGRADED, 1), ("INCONCLUSIVE", 3)])
def test_cli_exit_codes_and_alert(tmp_path, monkeypatch, capsys, verdict, code):
    from canary import cli

    seen = []

    def fake_run(config, index, origin):
        assert index is not None and origin.trigger == "cli"  # listed in the runs index, started by hand
        seen.append(config)
        return SweepBrief(cluster="c1", sweep_id="s1", verdict=verdict, reason="because", first_sweep=False,
                          during_rollout=False, seconds=1.0, report="r.html", result_file="r.json", history="h",
                          history_file="h", trend_file="t", reference_sweeps=1, summary=sweep_summary([]))

    monkeypatch.setattr(sweep_cli, "run_sweep", fake_run)
    monkeypatch.delenv(WEBHOOK_ENV, raising=False)
    argv = ["sweep", "--bootstrap-servers", "b:9092", "--cluster-name", "c1", "--duration", "45s", "--rate", "7",
            "--history", str(tmp_path), "--alert", "--json"]
    assert cli.main(argv) == code
    assert (seen[0].duration, seen[0].rate, seen[0].cluster, seen[0].history) == (45.0, 7.0, "c1", str(tmp_path))
    printed = json.loads(capsys.readouterr().out)
    assert printed["verdict"] == verdict
    assert (tmp_path / "alerts.jsonl").exists() == (verdict == DEGRADED)


def test_cli_unreachable_cluster_is_exit_2(monkeypatch, capsys):
    from canary import cli
    from canary.probe.runner import ClusterUnreachable

    def unreachable(config, **_):
        raise ClusterUnreachable("cannot reach the cluster at b:9092")

    monkeypatch.setattr(sweep_cli, "run_sweep", unreachable)
    assert cli.main(["sweep", "--bootstrap-servers", "b:9092"]) == 2
    assert "cannot reach the cluster" in capsys.readouterr().err
