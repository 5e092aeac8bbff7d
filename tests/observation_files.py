"""Observations files for the analysis tests: a two-lane probe run in which the canary can lose messages, and a
judge config small runs can decide with. (tests/ is on sys.path: the suite's conftest.py lives there.)"""

from __future__ import annotations

import json
import random
from pathlib import Path

import yaml

START_MS = 1_700_000_000_000
# 60 s at 10 messages/s per lane decide with these (the defaults want more data).
SMALL_JUDGE = {"warmup_s": 5, "bucket_s": 5, "min_buckets": 2,
               "metrics": {name: {"min_samples": 50} for name in (
                   "e2e_latency_p50", "e2e_latency_p95", "e2e_latency_p99", "produce_latency_p99",
                   "produce_error_rate", "consume_error_rate", "loss_rate", "duplicate_rate", "out_of_order_rate",
                   "availability", "throughput")}}


def probe_run(run_id: str = "run-a", start_ms: int = START_MS, lose_every: int | None = None) -> list[dict]:
    """60 s of probe observations at 10/s per lane; with `lose_every` the canary loses every n-th message."""
    rng = random.Random(7)
    records = []
    for lane, partition in (("canary", 0), ("baseline", 1)):
        for seq in range(600):
            send = start_ms + seq * 100
            lost = lane == "canary" and lose_every is not None and seq % lose_every == 0
            records.append({"run_id": run_id, "kind": "probe", "source": "probe-0", "topic": "__kafka_canary",
                            "partition": partition, "leader": partition + 1, "lane": lane, "producer_id": "p",
                            "message_id": f"{lane}-{seq}", "seq": seq, "send_ts": send,
                            "ack_ts": send + rng.randint(2, 4),
                            "receive_ts": None if lost else send + rng.randint(5, 9),
                            "outcome": "lost" if lost else "delivered", "schema": 1})
    return records


def write_lines(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def write_judge(path: Path) -> Path:
    path.write_text(yaml.safe_dump(SMALL_JUDGE))
    return path
