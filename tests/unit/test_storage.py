"""Run storage without a server: the disk store's conditional writes, keys, the merge of a lost run-state write, and
the URLs refused."""

from __future__ import annotations

import pytest

from canary.rollout.core.run import _merge
from canary.storage import Conflict, StoreError, open_store


def test_a_conditional_write_on_disk_loses_to_a_newer_one(tmp_path):
    store = open_store(tmp_path.as_uri()).child("r1")
    first = store.write_if("run.json", b"1", None)
    with pytest.raises(Conflict):
        store.write_if("run.json", b"x", None)  # it exists now
    second = store.write_if("run.json", b"2", first)
    with pytest.raises(Conflict):
        store.write_if("run.json", b"x", first)  # someone wrote since `first`
    assert store.read_versioned("run.json") == (b"2", second)
    assert store.read("missing.json") is None and store.workdir() == tmp_path / "r1"


@pytest.mark.parametrize("key", ["", "/etc/passwd", "../x", "a/../../x", "a//b", "./a"])
def test_keys_outside_a_run_are_refused(tmp_path, key):
    with pytest.raises(StoreError, match="not a key"):
        open_store(tmp_path).read(key)


@pytest.mark.parametrize(("url", "message"), [
    ("gs://bucket/runs", "gs:// is not supported"),
    ("abfs://container/runs", "abfs:// is not supported"),
    ("s3:///runs", "names no bucket"),
])
def test_stores_without_conditional_writes_or_a_bucket_are_refused(url, message):
    with pytest.raises(StoreError, match=message):
        open_store(url)


def test_a_lost_write_keeps_the_other_tasks_steps_and_lays_its_own_over_them():
    base = {"status": "new", "steps": {"preflight": {"status": "done"}}, "verdict": None}
    mine = {"status": "changed canary", "steps": {"preflight": {"status": "done"}, "deploy": {"status": "done"}},
            "verdict": None}
    theirs = {"status": "new", "steps": {"preflight": {"status": "done"}, "warm-up": {"status": "running"}},
              "verdict": {"verdict": "PROMOTE"}}
    assert _merge(base, mine, theirs) == {
        "status": "changed canary", "verdict": {"verdict": "PROMOTE"},
        "steps": {"preflight": {"status": "done"}, "warm-up": {"status": "running"}, "deploy": {"status": "done"}}}
