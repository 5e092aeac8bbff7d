"""How often does the gate roll back a harmless change? A long, resumable series of real broker rollouts of harmless
changes on fresh 3-broker embedded clusters, with the default spec, idle or carrying real traffic, alone on the
machine or beside a busy neighbour (a CPU-bound process at one core), as the machine usually is (issue 61).

    .venv/bin/python bench/precision_series.py run --ledger bench-results/precision.jsonl [--runs 100] [--window 2m]
    .venv/bin/python bench/precision_series.py summary --ledger bench-results/precision.jsonl

`run` goes through the cases round robin over (idle, traffic) x (alone, neighbour) and appends one JSON line per
rollout to the ledger as soon as it ends: the case, the mode, the commit, the load average before and after, the
verdict, the metrics that decided it and when; a series cut off (a session's end, a killed process) goes on from its
ledger where it stopped, never repeating a run it holds. Each rollout stops at its verdict (preflight to judge: the
promotion is not what this measures), then its cluster is torn down. `summary` prints the table per change and the
share of harmless changes not promoted, with its 95 % (Clopper-Pearson) interval.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scipy.stats import beta  # noqa: E402

from canary.cluster import distribution  # noqa: E402
from canary.cluster.local import LocalCluster  # noqa: E402
from canary.cluster.node_config import SMALL_MACHINE  # noqa: E402
from canary.cluster.traffic import TrafficSpec, UserTraffic  # noqa: E402
from canary.rollout.broker import BROKER, Rollout  # noqa: E402
from canary.rollout.broker.spec import load_spec  # noqa: E402
from canary.rollout.core.audit import AuditAction  # noqa: E402

# name -> the change (broker config overrides; "version" for an upgrade). Each is harmless: it changes nothing a
# client can measure on this machine, or only within sane ranges.
CASES: dict[str, dict] = {
    "same-value": {"config": {"num.io.threads": SMALL_MACHINE["num.io.threads"]}},           # a no-op restart
    "same-value-as-another-string": {"config": {"log.retention.hours": "168"}},               # Kafka's default, said
    "start-up-only": {"config": {"num.recovery.threads.per.data.dir": "2"}},                  # used only at start-up
    "retention-check-less-often": {"config": {"log.retention.check.interval.ms": "600000"}},
    "cleaner-backoff": {"config": {"log.cleaner.backoff.ms": "15001"}},
    "more-io-threads": {"config": {"num.io.threads": "6"}},
    "more-network-threads": {"config": {"num.network.threads": "3"}},
    "second-replica-fetcher": {"config": {"num.replica.fetchers": "2"}},
    "larger-socket-buffers": {"config": {"socket.send.buffer.bytes": "204800",
                                         "socket.receive.buffer.bytes": "204800"}},
    "larger-replica-fetch-buffer": {"config": {"replica.socket.receive.buffer.bytes": "131072"}},
    "sparser-index": {"config": {"log.index.interval.bytes": "8192"}},
    "version-upgrade": {"version": distribution.TARGET_VERSION},
}
MODES = [(traffic, neighbour) for traffic in ("idle", "traffic") for neighbour in (False, True)]
TRAFFIC = TrafficSpec("orders", 1000, 1000, 8, 3)  # 1,000 records/s of 1 kB, acks=all, as the demo's


def commit() -> str:
    found = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                           cwd=Path(__file__).resolve().parents[1])
    return found.stdout.strip() or "unknown"


def schedule(runs: int) -> list[tuple[str, str, bool, int]]:
    """The series' runs in order: (case, traffic mode, neighbour, round). Each round takes every case once, each in
    the next of the four modes, so any prefix of the series is balanced (every fourth round alike) and every four
    rounds give every case every mode."""
    order = []
    for attempt in itertools.count():
        for i, case in enumerate(CASES):
            mode, neighbour = MODES[(i + attempt) % len(MODES)]
            order.append((case, mode, neighbour, attempt))
            if len(order) == runs:
                return order
    return order


def key(row: dict) -> tuple:
    return row["case"], row["mode"], row["neighbour"], row["attempt"]


def done_runs(ledger: Path) -> set[tuple]:
    if not ledger.exists():
        return set()
    return {key(json.loads(line)) for line in ledger.read_text().splitlines() if line.strip()}


def neighbour_process() -> subprocess.Popen:
    """A CPU-bound process at one core for as long as it lives (a busy machine, as it usually is)."""
    return subprocess.Popen([sys.executable, "-c", "while True: pass"])


def rollout_to_verdict(root: Path, case: str, mode: str, attempt: int, window: str) -> dict:
    """One rollout of `case` on a fresh 3-broker cluster, preflight to the verdict; the cluster torn down after."""
    change = CASES[case]
    cluster = LocalCluster.up(root / "cluster", brokers=3)
    traffic = None
    try:
        if mode == "traffic":
            traffic = UserTraffic(distribution.ensure(cluster.state.brokers[0].version), cluster.bootstrap_servers,
                                  TRAFFIC, root / "traffic").start()
            time.sleep(15)  # the tools' JVMs up and their traffic steady before preflight measures it
        spec = load_spec({"cluster": {"dir": str(cluster.directory)}, "change": change,
                          "canary": {"brokers": [2 + attempt % 2]}, "probe": {"window": window},
                          "run_id": f"{case}-{mode}-{attempt}"})
        rollout = Rollout(spec, root / "run")
        error = None
        try:
            for step in BROKER.steps:
                step(rollout)
        except Exception as exc:  # a step that failed: recorded as such, the series goes on
            error = f"{type(exc).__name__}: {exc}"[:300]
        return decided(rollout, error)
    finally:
        if traffic is not None:
            traffic.stop()
        cluster.down()


def decided(rollout: Rollout, error: str | None) -> dict:
    """What the rollout decided: the verdict, the metrics that failed, the reason, when after the window's start."""
    verdict, window = rollout.state.verdict, rollout.record.window
    at = next((e.ts_ms for e in rollout.audit.of(AuditAction.VERDICT)), None)
    return {"verdict": verdict.verdict if verdict else "ERROR", "failed": verdict.failed if verdict else [],
            "reason": (verdict.reason if verdict else error or "")[:400], "error": error,
            "stopped_early": bool(verdict and verdict.stopped_early),
            "decided_after_s": round((at - window.start_ms) / 1000, 1) if at and window else None,
            "traffic": window.traffic.reason if window and window.traffic else None}


def run(args: argparse.Namespace) -> None:
    args.ledger.parent.mkdir(parents=True, exist_ok=True)
    done = done_runs(args.ledger)
    todo = [r for r in schedule(args.runs) if r not in done]
    print(f"{len(done)} run(s) in {args.ledger}; {len(todo)} to go", flush=True)
    for case, mode, neighbour, attempt in todo:
        busy = neighbour_process() if neighbour else None
        load_before = os.getloadavg()[0]
        started, started_at = time.monotonic(), time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        try:
            with tempfile.TemporaryDirectory(prefix="precision-") as tmp:
                result = rollout_to_verdict(Path(tmp), case, mode, attempt, args.window)
        finally:
            if busy is not None:
                busy.kill()
                busy.wait()
        row = {"case": case, "mode": mode, "neighbour": neighbour, "attempt": attempt, "commit": commit(),
               "started": started_at, "window": args.window,
               "load_before": round(load_before, 2), "load_after": round(os.getloadavg()[0], 2),
               "took_s": round(time.monotonic() - started), **result}
        with open(args.ledger, "a") as ledger:
            ledger.write(json.dumps(row) + "\n")
        print(json.dumps(row), flush=True)


def interval(bad: int, total: int, level: float = 0.95) -> tuple[float, float]:
    """The Clopper-Pearson interval of the share bad/total."""
    tail = (1 - level) / 2
    low = 0.0 if bad == 0 else float(beta.ppf(tail, bad, total - bad + 1))
    high = 1.0 if bad == total else float(beta.ppf(1 - tail, bad + 1, total - bad))
    return low, high


def summary(args: argparse.Namespace) -> None:
    rows = [json.loads(line) for line in args.ledger.read_text().splitlines() if line.strip()]
    print("| change | mode | neighbour | runs | PROMOTE | ROLLBACK | INCONCLUSIVE | error | what decided the others |")
    print("|---|---|---|---|---|---|---|---|---|")
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault((r["case"], r["mode"], r["neighbour"]), []).append(r)
    for (case, mode, neighbour), group in sorted(groups.items()):
        counts = {word: sum(r["verdict"] == word for r in group) for word in ("PROMOTE", "ROLLBACK", "INCONCLUSIVE",
                                                                               "ERROR")}
        why = "; ".join(sorted({", ".join(r["failed"]) or r["reason"][:60]
                                for r in group if r["verdict"] != "PROMOTE"}))
        print(f"| {case} | {mode} | {'yes' if neighbour else 'no'} | {len(group)} | {counts['PROMOTE']} | "
              f"{counts['ROLLBACK']} | {counts['INCONCLUSIVE']} | {counts['ERROR']} | {why or '-'} |")
    judged = [r for r in rows if r["verdict"] != "ERROR"]
    bad = sum(r["verdict"] != "PROMOTE" for r in judged)
    low, high = interval(bad, len(judged)) if judged else (0.0, 1.0)
    upper = float(beta.ppf(0.95, bad + 1, len(judged) - bad)) if judged and bad < len(judged) else 1.0
    print(f"\nharmless changes not promoted: {bad} of {len(judged)} judged "
          f"({100 * bad / max(1, len(judged)):.1f} %, 95 % interval {100 * low:.1f}–{100 * high:.1f} %, "
          f"one-sided 95 % bound {100 * upper:.1f} %); {len(rows) - len(judged)} run(s) ended in an error; "
          f"{len({r['case'] for r in rows})} distinct changes; with the neighbour: "
          f"{sum(r['neighbour'] for r in rows)} run(s); commits {sorted({r['commit'] for r in rows})}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    go = sub.add_parser("run", help="run (or go on with) the series")
    go.add_argument("--ledger", type=Path, required=True)
    go.add_argument("--runs", type=int, default=100, help="the series' length, runs already in the ledger included")
    go.add_argument("--window", default="2m", help="the probe window (the default spec's: 2m)")
    show = sub.add_parser("summary", help="the table per change and the rate of harmless changes not promoted")
    show.add_argument("--ledger", type=Path, required=True)
    args = p.parse_args()
    run(args) if args.command == "run" else summary(args)


if __name__ == "__main__":
    main()
