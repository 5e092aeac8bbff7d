"""The fault table (issue 8): every fault scenario of tests/reliability/fault_scenarios.py, run once on one local
cluster (3 brokers, 3 controllers), printed as fault → outcome → acknowledged messages lost → time from the fault
to the safe state.

    .venv/bin/python bench/fault_bench.py [--only a,b,...] [--json FILE] [--keep]

"Lost" adds the rollout's own probe observations (an acknowledged message the probe did not receive and that is
not in its partition's log either, or one its probe did not account for) and the independent
produce-consume-validate stream that runs through the whole scenario. "Late": acknowledged messages the probe did
not receive within its 15 s round-trip SLA (its metrics count them as lost) but that are in the log. "Safe state" is the
verify step finishing (rolled back or promoted, verified) or, for a rollout refused before any change, the
refusal. The same scenarios, with assertions, are tests/reliability/test_fault_suite.py.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from canary.cluster import process  # noqa: E402
from canary.cluster.local import LocalCluster  # noqa: E402
from tests.reliability import fault_scenarios as fs  # noqa: E402


def table(results: list[fs.Result]) -> str:
    lines = ["| # | fault | outcome | verdict | acked (probe + stream) | acked lost | late | fault → safe state | "
             "guard violations | broker starts (expected) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        acked = f"{r.probe.get('acked', 0)} + {r.validated.get('acked', 0)}"
        starts = ", ".join(f"{b}: {n}" for b, n in sorted(r.starts.items()))
        expected = ", ".join(f"{b}: {n}" for b, n in sorted(r.expected_starts.items()))
        safe = f"{r.safe_s:.0f} s" if r.safe_s is not None else "—"
        lines.append(f"| {r.scenario} | {r.fault} | {r.outcome} | {r.verdict or '—'} | {acked} | {r.lost} | "
                     f"{r.probe.get('late', 0)} | {safe} | {len(r.guard_violations)} | {starts} ({expected}) |")
    for r in results:
        if r.kills and r.scenario == "d":
            lines += ["", f"({r.scenario}) each step's process SIGKILLed, then the step re-run:", "",
                      "| step | killed inside the step | attempts | kill → step done again | re-run exit |",
                      "|---|---|---|---|---|"]
            lines += [f"| {k['step']} | {'yes' if k['mid_step'] else 'no (it had finished)'} | {k.get('attempts')} | "
                      f"{k.get('converged_s', '—')} s | {k.get('retry_exit')} |" for k in r.kills]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", help="comma-separated scenario letters (default: all)")
    parser.add_argument("--json", type=Path, help="also write every result as JSON here")
    parser.add_argument("--dir", type=Path, help="work directory (default: a new temporary one)")
    args = parser.parse_args(argv)
    chosen = args.only.split(",") if args.only else list(fs.SCENARIOS)
    work = args.dir or Path(tempfile.mkdtemp(prefix="kafka-canary-faults-"))
    print(f"fault bench in {work}; load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} "
          f"{os.getloadavg()[2]:.2f} on {os.cpu_count()} cores", flush=True)
    started = time.monotonic()
    cluster = LocalCluster.up(work / "cluster", brokers=3, controllers=3, tie_to_parent=True)
    results = []
    try:
        for letter in chosen:
            fixed = fs.heal(cluster)
            if fixed:
                print(f"  before {letter}: {'; '.join(fixed)}", flush=True)
            t = time.monotonic()
            result = fs.SCENARIOS[letter](cluster, work)
            results.append(result)
            print(f"  {letter}: {result.outcome}, lost {result.lost}, safe after {result.safe_s} s, "
                  f"{time.monotonic() - t:.0f} s in all; errors {result.errors}; guard {result.guard_violations}",
                  flush=True)
    finally:
        try:
            cluster.down()
        finally:
            process.kill_marked(str(cluster.directory) + "#")
    print()
    print(table(results))
    load = os.getloadavg()
    print(f"\n{len(results)} scenarios in {time.monotonic() - started:.0f} s; load average {load[0]:.2f} {load[1]:.2f} "
          f"{load[2]:.2f}")
    if args.json:
        args.json.write_text(json.dumps([r.__dict__ | {"safe_s": r.safe_s, "lost": r.lost} for r in results],
                                        indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
