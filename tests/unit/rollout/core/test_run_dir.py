"""Where a run lives when no --run-dir is given: one place whatever directory the command starts in; and what a run
directory may be: new, empty or already this run, anything else refused before anything is written there."""

from __future__ import annotations

from pathlib import Path

import pytest

from canary.rollout.core.record import RunStatus
from canary.rollout.core.run import RunState, RunStateError, run_store
from canary.storage import StoreError


def test_the_default_run_dir_is_not_the_working_directory(tmp_path, monkeypatch):
    monkeypatch.delenv("KAFKA_CANARY_RUNS", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    assert run_store(None, "r1").workdir() == tmp_path / "home/.local/state/kafka-canary/rollouts/r1"


def test_kafka_canary_runs_places_every_run(tmp_path, monkeypatch):
    monkeypatch.setenv("KAFKA_CANARY_RUNS", str(tmp_path / "runs"))
    assert run_store(None, "r1").workdir() == Path(tmp_path / "runs/r1")
    monkeypatch.setenv("KAFKA_CANARY_RUNS", (tmp_path / "elsewhere").as_uri())
    assert run_store(None, "r1").workdir() == Path(tmp_path / "elsewhere/r1")


# ----- a run directory is new, empty or already this run: anything else is refused before anything is written -----

SPEC = {"change": {"config": {"num.io.threads": "6"}}}


def _listing(path: Path) -> dict[str, bytes]:
    return {p.relative_to(path).as_posix(): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("url", [False, True])
def test_a_directory_holding_anything_else_is_refused_and_left_as_it_was(tmp_path, url):
    foreign = tmp_path / "etc"
    foreign.mkdir()
    (foreign / "report.html").write_text("<p>another tool's report</p>")
    (foreign / "audit.jsonl").write_text('{"theirs": 1}\n')
    before = _listing(foreign)
    with pytest.raises(RunStateError) as refused:
        RunState.open(foreign.as_uri() if url else foreign, "r1", SPEC)
    assert str(refused.value) == (
        f"run directory {foreign.as_uri()} already holds files that are no run of kafka-canary's (audit.jsonl, "
        f"report.html) and no run.json; a run directory must be new, empty or a run of kafka-canary's, so nothing of "
        f"its own is overwritten: use another --run-dir")
    assert _listing(foreign) == before and sorted(p.name for p in foreign.iterdir()) == ["audit.jsonl", "report.html"]


@pytest.mark.parametrize("text, why", [
    ("not json", "is not JSON"),
    ('{"status": "ok"}', "is no run of kafka-canary's (it has no schema and run_id)"),
    ('["r1"]', "is no run of kafka-canary's"),
])
def test_a_run_json_that_is_not_ours_is_refused(tmp_path, text, why):
    (tmp_path / "run.json").write_text(text)
    with pytest.raises(RunStateError) as refused:
        RunState.open(tmp_path, "r1", SPEC)
    assert str(refused.value).startswith(f"{tmp_path.as_uri()}/run.json {why}"), refused.value
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.json"] and (tmp_path / "run.json").read_text() == text


@pytest.mark.parametrize("where", ["a file", "/dev/null"])
def test_a_file_as_the_run_directory_is_refused_in_one_line(tmp_path, where):
    path = Path("/dev/null") if where == "/dev/null" else tmp_path / "a-file"
    if where == "a file":
        path.write_text("x")
    with pytest.raises(StoreError) as refused:
        RunState.open(path, "r1", SPEC)
    assert str(refused.value) == (f"run storage {path.as_uri()}: {path} is not a directory, so it cannot hold a run "
                                  f"(a run directory must be new, empty or a run of kafka-canary's); use another "
                                  f"--run-dir")


def test_a_new_an_empty_and_our_own_run_directory_are_used(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / ".run.json.lock").write_text("")  # what another task's write leaves for a moment: ours
    state = RunState.open(empty, "r1", SPEC)
    state.step_started("preflight")
    (empty / "report.html").write_text("<p>ours</p>")
    assert RunState.open(empty, "r1", SPEC).record.steps["preflight"].attempts == 1  # resumed
    with pytest.raises(RunStateError, match="holds rollout r1, not r2; use another --run-dir"):
        RunState.open(empty, "r2", SPEC)
    assert RunState.open(tmp_path / "new" / "r1", "r1", SPEC).status is RunStatus.NEW


def test_a_prefix_holding_foreign_objects_is_refused_on_an_object_store():
    import fsspec

    from canary.storage.objects import ObjectStore

    fs = fsspec.filesystem("memory", skip_instance_cache=True)
    fs.pipe_file("bucket/runs/theirs/report.html", b"<p>another tool's report</p>")
    store = ObjectStore("s3://bucket/runs/theirs", "s3", {}, fs=fs)
    assert store.names() == ["report.html"]
    with pytest.raises(RunStateError, match="run directory s3://bucket/runs/theirs already holds files that are no "
                                            "run of kafka-canary's \\(report.html\\)"):
        RunState.open(store, "r1", SPEC)
    assert fs.find("bucket/runs/theirs") == ["/bucket/runs/theirs/report.html"]
    assert ObjectStore("s3://bucket/runs/new", "s3", {}, fs=fs).names() == []


def test_a_rollout_refuses_the_run_directory_before_it_asks_for_the_cluster(tmp_path):
    """The run directory is checked first: a spec naming no cluster still gets the run directory's refusal."""
    from canary.rollout.broker import BROKER

    foreign = tmp_path / "etc"
    foreign.mkdir()
    (foreign / "passwd").write_text("root:x:0:0")
    spec = {"cluster": {"dir": str(tmp_path / "no-cluster")}, "change": {"config": {"num.io.threads": "6"}},
            "canary": {"count": 1}}
    with pytest.raises(RunStateError, match="already holds files that are no run of kafka-canary's \\(passwd\\)"):
        BROKER.open(spec, foreign.as_uri())
    assert sorted(p.name for p in foreign.iterdir()) == ["passwd"]
