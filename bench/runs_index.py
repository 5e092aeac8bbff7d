"""The runs index page with thousands of runs (issue 38: under 1 s for 5,000), on this disk and on a real
S3-compatible server on 127.0.0.1 (versitygw, as the tests start it): the page as the plugin serves it, from the
index; making the index again from every run.json (what every page cost before the index, and what a missing index
costs once); one run's row written into an index of that size (what a rollout's status change adds).

    .venv/bin/python bench/runs_index.py [--runs 5000] [--pages 20]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from kafka_canary_provider.plugin import _index

from canary.rollout.core.index import IndexEntry, RunsIndex
from canary.storage import Store, open_store

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from object_store import s3_server  # noqa: E402

VERDICTS = ("PROMOTE", "ROLLBACK", "INCONCLUSIVE")
STATUS = {"PROMOTE": "verified promoted", "ROLLBACK": "verified rolled_back", "INCONCLUSIVE": "judged INCONCLUSIVE"}


def _run_json(n: int) -> bytes:
    verdict = VERDICTS[n % 3]
    cluster = {"dir": f"/srv/kafka-{n % 7}"}
    spec = {"cluster": cluster, "service": {"name": "billing"}, "from_version": "1.0", "to_version": "2.0"} \
        if n % 4 == 0 else {"cluster": cluster, "change": {"version": "4.1.2", "config": {"num.io.threads": "6"}},
                            "canary_count": 1}
    steps = {"preflight": {"status": "done", "attempts": 1, "started_ms": 1_700_000_000_000 + n * 60_000,
                           "finished_ms": 1_700_000_000_000 + n * 60_000 + 240_000}}
    return json.dumps({"schema": 1, "run_id": f"run-{n:05d}", "created_ms": 1_700_000_000_000 + n * 60_000,
                       "spec": spec, "status": STATUS[verdict], "steps": steps,
                       "verdict": {"verdict": verdict, "reason": "bench"}}).encode()


def _timed(action: Callable[[], object], count: int) -> str:
    took = []
    for _ in range(count):
        started = time.perf_counter()
        action()
        took.append((time.perf_counter() - started) * 1000)
    return f"median {statistics.median(took):7.1f} ms, max {max(took):7.1f} ms ({count} times)"


def measure(label: str, root: Store, runs: int, pages: int) -> None:
    started = time.perf_counter()
    for n in range(runs):
        root.child(f"run-{n:05d}").write("run.json", _run_json(n))
    print(f"{label}: {runs} runs written in {time.perf_counter() - started:.1f} s")
    index = RunsIndex(root)
    started = time.perf_counter()
    index.rebuild()
    print(f"{label}: the index made from every run.json: {time.perf_counter() - started:.1f} s")
    page = _index(root, {}, 1)
    assert page.count("<tr>") == 51 and f"{runs} run(s)" in page, page[:500]
    print(f"{label}: the index page, newest 50:           {_timed(lambda: _index(root, {}, 1), pages)}")
    print(f"{label}: a filtered page (cluster, verdict):  "
          f"{_timed(lambda: _index(root, {'cluster': '/srv/kafka-3', 'verdict': 'ROLLBACK'}, 3), pages)}")
    row = IndexEntry(run_id="run-new", kind="broker", cluster="/srv/kafka-0", change="-", verdict="",
                     outcome="UNFINISHED", status="new", started_ms=1_800_000_000_000, duration_s=None)
    print(f"{label}: one run's row put into the index:    {_timed(lambda: index.put(row), pages)}")
    print(f"{label}: index size {len(root.read('runs-index.json') or b'') / 1e6:.2f} MB")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5000)
    parser.add_argument("--pages", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="runs-index-bench-") as tmp:
        measure("disk", open_store(Path(tmp) / "runs"), args.runs, args.pages)
        with s3_server(Path(tmp) / "s3") as server:
            os.environ.update(server.env())
            measure("s3 (versitygw)", open_store(f"s3://{server.make_bucket('runs')}/runs"), args.runs, args.pages)
    return 0


if __name__ == "__main__":
    sys.exit(main())
