"""Our probe and the Strimzi canary side by side: CPU per message and memory of each process at the same rate, on the
same brokers at the same time.

    .venv/bin/python bench/probe_vs_strimzi.py --strimzi-source DIR [--rates 10,100] [--seconds 60]
    .venv/bin/python bench/probe_vs_strimzi.py --strimzi-canary BINARY ...

The Strimzi canary is built from a checkout of github.com/strimzi/strimzi-canary (`go build ./cmd`; its dependencies
come from the Go module proxy), or taken as a binary built before. Starts its own 3-broker local cluster. For each
rate (messages per second per partition): both run on their own topic (one partition per broker), ours as a rollout
runs it (`kafka-canary probe`, observations to the observations topic, metrics on HTTP), the Strimzi canary with
RECONCILE_INTERVAL_MS = 1000 / rate (one message per partition per interval). After a warm-up, each process's CPU
time over the window is divided by the records it produced (read from each one's own Prometheus counter); the
peak RSS is printed beside it.

Goal (issue: the gate must see what hurts): our CPU per message no worse than the Strimzi canary's at any rate.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from canary import process  # noqa: E402
from canary.cluster.local import LocalCluster  # noqa: E402

STRIMZI_PORT = 8080  # the Strimzi canary's HTTP port is fixed


@dataclass
class Canary:
    name: str
    proc: subprocess.Popen
    log: Path
    metrics_url: str
    produced_metric: str

    def produced(self) -> float:
        text = urllib.request.urlopen(self.metrics_url, timeout=5).read().decode()
        pattern = rf"^{self.produced_metric}(?:{{[^}}]*}})? ([0-9.e+]+)$"
        return sum(float(v) for v in re.findall(pattern, text, re.MULTILINE))

    def cpu_seconds(self) -> float:
        times = psutil.Process(self.proc.pid).cpu_times()
        return times.user + times.system

    def rss(self) -> int:
        return psutil.Process(self.proc.pid).memory_info().rss

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def build_strimzi(source: Path, out: Path) -> Path:
    binary = out / "strimzi-canary"
    subprocess.run(["go", "build", "-o", str(binary), "./cmd"], cwd=source, check=True)
    return binary


def start_ours(bootstrap: str, rate: float, port: int, log: Path) -> Canary:
    cmd = [sys.executable, "-m", "canary.cli", "probe", "--bootstrap-servers", bootstrap, "--rate", str(rate),
           "--topic", f"ours-{rate:g}", "--http-port", str(port), "--producer-id", f"bench-{rate:g}"]
    proc = subprocess.Popen(cmd, stdout=log.open("w"), stderr=subprocess.STDOUT)
    return Canary("ours", proc, log, f"http://127.0.0.1:{port}/metrics", "kafka_canary_records_produced_total")


def start_strimzi(binary: Path, bootstrap: str, rate: float, log: Path) -> Canary:
    env = {**os.environ, "KAFKA_BOOTSTRAP_SERVERS": bootstrap, "TOPIC": f"strimzi-{rate:g}",
           "RECONCILE_INTERVAL_MS": str(round(1000 / rate)), "CONSUMER_GROUP_ID": f"strimzi-{rate:g}",
           "EXPECTED_CLUSTER_SIZE": "3"}
    proc = subprocess.Popen([str(binary)], env=env, stdout=log.open("w"), stderr=subprocess.STDOUT)
    return Canary("strimzi", proc, log, f"http://127.0.0.1:{STRIMZI_PORT}/metrics",
                  "strimzi_canary_records_produced_total")


def wait_producing(canary: Canary, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if canary.proc.poll() is not None:
            raise RuntimeError(f"{canary.name} exited with {canary.proc.returncode}; its log ends:\n"
                               + canary.log.read_text()[-2000:])
        try:
            if canary.produced() > 0:
                return
        except OSError:
            pass
        time.sleep(1)
    raise RuntimeError(f"{canary.name} produced nothing within {timeout:g} s; its log ends:\n"
                       + canary.log.read_text()[-2000:])


def measure(canaries: list[Canary], seconds: float) -> dict[str, dict[str, float]]:
    before = {c.name: (c.cpu_seconds(), c.produced()) for c in canaries}
    peak = dict.fromkeys((c.name for c in canaries), 0)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        time.sleep(1)
        for c in canaries:
            peak[c.name] = max(peak[c.name], c.rss())
    result = {}
    for c in canaries:
        cpu0, sent0 = before[c.name]
        sent = c.produced() - sent0
        cpu = c.cpu_seconds() - cpu0
        result[c.name] = {"messages": sent, "cpu_s": cpu, "cpu_ms_per_msg": 1000 * cpu / max(sent, 1),
                          "rss_mib": peak[c.name] / 2**20}
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    built = parser.add_mutually_exclusive_group(required=True)
    built.add_argument("--strimzi-source", type=Path, help="a checkout of github.com/strimzi/strimzi-canary")
    built.add_argument("--strimzi-canary", type=Path, help="a Strimzi canary binary built before")
    parser.add_argument("--rates", default="10,100", help="messages per second per partition, comma-separated")
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--warmup", type=float, default=15.0)
    args = parser.parse_args()
    process.require_free(STRIMZI_PORT, "the Strimzi canary's HTTP server", "0.0.0.0", "(fixed by the Strimzi canary)")
    with tempfile.TemporaryDirectory(prefix="probe-vs-strimzi-") as tmp:
        binary = args.strimzi_canary or build_strimzi(args.strimzi_source, Path(tmp))
        cluster = LocalCluster.up(Path(tmp) / "cluster", brokers=3, tie_to_parent=True)
        try:
            print(f"{'rate/partition':>14}  {'canary':>8}  {'messages':>8}  {'CPU s':>6}  {'CPU ms/msg':>10}  "
                  f"{'peak RSS MiB':>12}")
            for rate in (float(r) for r in args.rates.split(",")):
                port = process.free_port()
                canaries = [start_ours(cluster.bootstrap_servers, rate, port, Path(tmp) / f"ours-{rate:g}.log"),
                            start_strimzi(binary, cluster.bootstrap_servers, rate, Path(tmp) / f"strimzi-{rate:g}.log")]
                try:
                    for c in canaries:
                        wait_producing(c)
                    time.sleep(args.warmup)
                    for name, row in measure(canaries, args.seconds).items():
                        print(f"{rate:>14g}  {name:>8}  {row['messages']:>8.0f}  {row['cpu_s']:>6.2f}  "
                              f"{row['cpu_ms_per_msg']:>10.3f}  {row['rss_mib']:>12.1f}", flush=True)
                finally:
                    for c in canaries:
                        c.stop()
        finally:
            cluster.down()


if __name__ == "__main__":
    main()
