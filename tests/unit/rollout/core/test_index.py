"""The runs index (canary.rollout.core.index): a run under the runs' root keeps its row current as it goes, a run
elsewhere has none; the index is made again from the run.json files when missing or damaged; rows are filtered,
newest first, paged; concurrent writers lose no row; a secret config value never reaches the page; a row says what
started the run; health sweeps have rows of their own, which a rebuild keeps."""

from __future__ import annotations

import json
import threading

from canary.rollout.core.index import INDEX_KEY, IndexEntry, RunsIndex, query, sweep_row_id
from canary.rollout.core.record import Origin, RunStatus, Verdict
from canary.rollout.core.run import RunState
from canary.storage import open_store

BROKER_SPEC = {"cluster": {"dir": "/tmp/kc"}, "change": {"version": "4.1.2", "config": {"num.io.threads": "6"}},
               "canary_count": 1}
CLIENT_SPEC = {"cluster": {"dir": "/tmp/kc"}, "service": {"name": "billing"}, "from_version": "1.0",
               "to_version": "2.0"}


def _rows(root) -> dict:
    return json.loads((root / INDEX_KEY).read_text())["runs"]


def test_a_run_under_the_runs_root_keeps_its_row_current(tmp_path):
    runs = open_store(tmp_path / "runs")
    state = RunState.open(runs.child("r1"), "r1", BROKER_SPEC)
    assert _rows(tmp_path / "runs")["r1"] | {"started_ms": 0} == {
        "run_id": "r1", "kind": "broker", "cluster": "/tmp/kc", "change": "version 4.1.2, num.io.threads=6",
        "verdict": "", "outcome": "UNFINISHED", "status": "new", "started_ms": 0, "duration_s": None,
        "trigger": "", "report": "runs/r1/report.html", "airflow_run": ""}
    state.update(status=RunStatus.VERIFIED_ROLLED_BACK, verdict=Verdict(verdict="ROLLBACK", reason="e2e p99"))
    row = _rows(tmp_path / "runs")["r1"]
    assert (row["verdict"], row["outcome"], row["status"]) == ("ROLLBACK", "ROLLBACK", "verified rolled_back")


def test_a_run_in_a_directory_of_its_own_writes_no_index(tmp_path):
    RunState.open(tmp_path / "elsewhere" / "r1", "r1", BROKER_SPEC)
    assert not (tmp_path / "elsewhere" / INDEX_KEY).exists() and not (tmp_path / INDEX_KEY).exists()


def test_the_index_is_made_again_from_the_runs_when_missing_or_damaged(tmp_path, caplog):
    runs = open_store(tmp_path / "runs")
    RunState.open(runs.child("a"), "a", BROKER_SPEC)
    RunState.open(runs.child("b"), "b", CLIENT_SPEC)
    (tmp_path / "runs" / "junk").mkdir()
    (tmp_path / "runs" / "junk" / "run.json").write_text("not json")
    for damage in (None, b"{not json", json.dumps({"schema": 99, "runs": []}).encode()):
        if damage is None:
            (tmp_path / "runs" / INDEX_KEY).unlink()
        else:
            (tmp_path / "runs" / INDEX_KEY).write_bytes(damage)
        entries = RunsIndex(runs).entries()
        assert {(e.run_id, e.kind, e.change) for e in entries} == {
            ("a", "broker", "version 4.1.2, num.io.threads=6"), ("b", "client", "1.0 → 2.0")}
        assert set(_rows(tmp_path / "runs")) == {"a", "b"}  # written again
    assert "run junk is left out of the runs index" in caplog.text


def _entry(n: int, **fields) -> IndexEntry:
    base = {"run_id": f"r{n:04d}", "kind": "broker", "cluster": "c1", "change": "-", "verdict": "PROMOTE",
            "outcome": "PROMOTE", "status": "verified promoted", "started_ms": n, "duration_s": 60.0}
    return IndexEntry(**(base | fields))


def test_a_page_is_newest_first_filtered_and_paged():
    entries = sorted([_entry(n) for n in range(120)] + [_entry(n, cluster="c2", verdict="ROLLBACK")
                                                         for n in range(120, 130)],
                     key=lambda e: -e.started_ms)
    first = query(entries, {}, page=1)
    assert (first.total, first.pages, first.rows[0].run_id, len(first.rows)) == (130, 3, "r0129", 50)
    last = query(entries, {}, page=9)  # beyond the end: the last page
    assert (last.page, len(last.rows), last.rows[-1].run_id) == (3, 30, "r0000")
    c2 = query(entries, {"cluster": "c2", "verdict": "ROLLBACK", "unknown": "x"})
    assert (c2.total, {e.cluster for e in c2.rows}) == (10, {"c2"})
    assert query(entries, {"cluster": "c2", "verdict": "PROMOTE"}).total == 0
    assert first.choices["cluster"] == ["c1", "c2"] and first.choices["verdict"] == ["PROMOTE", "ROLLBACK"]


def test_writers_at_once_lose_no_row(tmp_path):
    root = open_store(tmp_path / "runs")

    failed: list[BaseException] = []

    def write(start: int) -> None:
        index = RunsIndex(root)
        try:
            for n in range(start, start + 25):
                index.put(_entry(n))
        except BaseException as exc:  # shown below: a thread's exception is otherwise lost
            failed.append(exc)
    threads = [threading.Thread(target=write, args=(k * 25,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failed == [] and len(RunsIndex(root).entries()) == 100


def test_a_secret_config_value_never_reaches_the_index(tmp_path):
    spec = BROKER_SPEC | {"change": {"config": {"ssl.keystore.password": "hunter2", "num.io.threads": "6"}}}
    RunState.open(open_store(tmp_path / "runs").child("r1"), "r1", spec)
    text = (tmp_path / "runs" / INDEX_KEY).read_text()
    assert "hunter2" not in text and "num.io.threads=6" in text


def test_a_run_s_row_says_what_started_it(tmp_path):
    runs = open_store(tmp_path / "runs")
    state = RunState.open(runs.child("r1"), "r1", BROKER_SPEC)
    origin = Origin(trigger="release", by="ci-bot", dag_id="kafka_broker_canary", airflow_run_id="rel_1")
    state.started_by(origin)
    state.started_by(Origin(trigger="cli"))  # a later task, a retry: the first word stands
    row = _rows(tmp_path / "runs")["r1"]
    assert (row["trigger"], row["airflow_run"]) == ("the release pipeline, by ci-bot", "kafka_broker_canary/rel_1")
    assert RunState.open(runs.child("r1"), "r1", BROKER_SPEC).record.origin == origin


def test_sweeps_are_listed_kept_by_a_rebuild_and_dropped_when_pruned(tmp_path):
    runs = open_store(tmp_path / "runs")
    RunState.open(runs.child("a"), "a", BROKER_SPEC)
    index = RunsIndex(runs)
    for n in (1, 2):
        index.put(IndexEntry.of_sweep("prod_eu", f"s{n}", "HEALTHY", 1_000 * n, 1_000 * n + 31_500,
                                      Origin(trigger="schedule", dag_id="kafka_health_sweep", airflow_run_id="x")))
    sweep = next(e for e in index.entries() if e.run_id == sweep_row_id("prod_eu", "s2"))
    assert (sweep.kind, sweep.verdict, sweep.duration_s, sweep.report, sweep.trigger) == (
        "sweep", "HEALTHY", 31.5, "sweeps/prod_eu/s2/report.html", "Airflow's schedule")
    assert {e.run_id for e in index.rebuild()} == {"a", "sweep-prod_eu-s1", "sweep-prod_eu-s2"}
    index.remove([sweep_row_id("prod_eu", "s1")])
    assert {e.run_id for e in index.entries()} == {"a", "sweep-prod_eu-s2"}


def test_a_row_written_before_the_trigger_field_still_reads(tmp_path):
    old = {"run_id": "r1", "kind": "broker", "cluster": "c", "change": "-", "verdict": "", "outcome": "UNFINISHED",
           "status": "new", "started_ms": 5, "duration_s": None}
    assert IndexEntry.from_json(old) == IndexEntry(**old)
