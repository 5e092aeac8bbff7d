"""The extra latency of a step's state write and of an audit entry: run storage on this disk vs on a real S3-compatible
server on 127.0.0.1 (versitygw, as the tests start it), and what a conflicting write costs (read, merge, write again).

    .venv/bin/python bench/storage_bench.py [--writes 200]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from canary.rollout.core.audit import AuditLog
from canary.rollout.core.run import RunState
from canary.storage import Store, open_store

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from object_store import s3_server  # noqa: E402


def _timed(action: Callable[[int], object], count: int) -> list[float]:
    took = []
    for i in range(count):
        started = time.perf_counter()
        action(i)
        took.append((time.perf_counter() - started) * 1000)
    return took


def _figures(name: str, millis: list[float]) -> str:
    ordered = sorted(millis)
    return (f"{name:<34} min {ordered[0]:6.2f}  median {statistics.median(ordered):6.2f}  "
            f"p95 {ordered[int(len(ordered) * 0.95) - 1]:6.2f} ms")


def _measure(label: str, store: Store, writes: int) -> None:
    spec = {"change": {"config": {"num.io.threads": "6"}}}
    state = RunState.open(store.child("bench"), "bench", spec)
    rival = RunState.open(store.child("bench"), "bench", spec)
    audit = AuditLog(store.child("bench"), "bench")
    print(_figures(f"{label}: step record (run.json)", _timed(lambda i: state.step_started(f"s{i % 9}"), writes)))
    print(_figures(f"{label}: audit entry", _timed(lambda i: audit.record("s", "bench", i=i), writes)))

    def conflicting(i: int) -> None:
        state.step_started("mine")  # the rival's copy is now stale: its write loses, merges and writes again
        rival.step_started("theirs")

    print(_figures(f"{label}: two writers, one conflict", _timed(conflicting, max(10, writes // 4))))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writes", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="storage-bench-") as tmp:
        _measure("file", open_store(Path(tmp) / "runs"), args.writes)
        with s3_server(Path(tmp) / "s3") as server:
            os.environ.update(server.env())
            _measure("s3 (versitygw)", open_store(f"s3://{server.make_bucket('bench')}/runs"), args.writes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
