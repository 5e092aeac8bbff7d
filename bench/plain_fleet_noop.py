"""Do no-op rollouts promote on a cluster started outside the tool? The acceptance bench of issue 34.

    .venv/bin/python bench/plain_fleet_noop.py [--runs 20] [--traffic 2000] [--window 2m] [--keep DIR]

The fleet: one KRaft controller and three brokers of Kafka 3.9.2 on 127.0.0.1, each a plain `java … kafka.Kafka
server.properties` process with the JVM settings of Kafka's own start script (heap 512 MB, G1, the default JIT with
C2, unlike the embedded cluster's C1-only JVMs) and the Prometheus JMX exporter agent, its storage formatted by the
release's StorageTool. A shell script of the kind a platform team keeps, written by the bench (`fleet-node.sh`:
roll, describe, stop, start), starts it once; after that the fleet is touched only by the command deployer running
that script — LocalCluster never sees it.

Each run is one rollout of the default spec (every topic led, capacity required, load auto, a 2-minute window; the
judge's engine inline) whose change is Kafka's default, `num.io.threads: "8"`, which the fleet states already: the
canary (broker 2, then 3, ...) is restarted with nothing changed, as is the control broker beside it, and the fleet
is left as it was, which is checked after every run. With `--traffic N` the fleet carries N records/s of 1 kB of
real client traffic for all the runs (Kafka's ProducerPerformance, acks=all, into `orders`: 8 partitions,
replication 3, and ConsumerPerformance reading it); with 0 it is idle and the spec's auto load stands in. Printed:
one JSON line per run (outcome and verdict, the metrics that decided, reason, seconds from the window's start to the
verdict, the canary's share of client traffic in the window, seconds in all, the user traffic's records acknowledged
per second over the run), then a table of the verdicts and what decided each one other than PROMOTE. Every run
should PROMOTE.
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.capacity_eval import decision_of  # noqa: E402
from canary import process  # noqa: E402
from canary.cluster import distribution, layout, metrics_agent  # noqa: E402
from canary.cluster.distribution import KafkaDistribution  # noqa: E402
from canary.cluster.traffic import TrafficSpec, UserTraffic, parse_producer  # noqa: E402
from canary.kafka.broker_config import properties_line  # noqa: E402
from canary.kafka.versions import BASELINE_VERSION  # noqa: E402
from canary.rollout.broker import BROKER, Rollout  # noqa: E402
from canary.rollout.broker.spec import load_spec  # noqa: E402
from canary.rollout.core import run_all  # noqa: E402
from canary.rollout.deployers import commands  # noqa: E402

BROKERS = (1, 2, 3)
CONTROLLER = 3000
NO_OP = {"num.io.threads": "8"}  # Kafka's default
# The brokers' own overrides. Stating the no-op's value makes every run alike, the first included: the canary is
# restarted twice (into the canary lane and out of it), the control broker once (the default canary.control: the
# other of 2 and 3), broker 1 not at all, and server.properties ends as it began.
FLEET_CONFIG = dict(NO_OP)
# What bin/kafka-server-start.sh runs (KAFKA_HEAP_OPTS, KAFKA_JVM_PERFORMANCE_OPTS), the heap cut to 512 MB.
FLEET_JVM_OPTS = ["-Xms512m", "-Xmx512m", "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
                  "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent",
                  "-Djava.awt.headless=true"]
STORAGE_TOOL = "kafka.tools.StorageTool"  # 3.9's; kafka-storage.sh runs it
SCRIPT = "fleet-node.sh"
START_TIMEOUT = 240.0  # the script's own wait for "Kafka Server started" is 180 s
# A fleet that has served for a while has JIT-compiled JVMs; a fresh one spends its first minute compiling (C2).
SETTLE_S = 60

NODE_SCRIPT = r"""#!/bin/sh
# A platform team's own tooling for plain Kafka processes on one host, as the command deployer drives it. Each node
# has its directory $FLEET/node-<id>: base.properties (what the host owns: id, roles, listeners, quorum, log dirs;
# never broker.rack, which every roll brings, the canary marker in it), overrides.properties (what the last roll set),
# server.properties (the two together), VERSION, jvm.options (one JVM option a line), pid and logs/. Kafka <version>
# is installed in $FLEET/kafka-<version>/libs.
#
#   fleet-node.sh roll ID VERSION CONFIG_FILE   stop gracefully, put VERSION and the config in place, start
#   fleet-node.sh describe ID                   prints "VERSION running" or "VERSION stopped"
#   fleet-node.sh stop ID | start ID
set -eu
FLEET=$(cd "$(dirname "$0")" && pwd)
. "$FLEET/fleet.env"
action=${1:-} id=${2:-}
node=$FLEET/node-$id
[ -n "$id" ] && [ -d "$node" ] || { echo "$0: no node '$id' in $FLEET" >&2; exit 2; }

running() {  # sets $pid; a zombie, or a pid the kernel gave to another process, is not the node
  [ -s "$node/pid" ] || return 1
  pid=$(cat "$node/pid")
  state=$(sed 's/.*) //' "/proc/$pid/stat" 2>/dev/null | cut -d' ' -f1)
  [ -n "$state" ] && [ "$state" != Z ] &&
    tr '\0' '\n' < "/proc/$pid/cmdline" 2>/dev/null | grep -qxF "$node/server.properties"
}

stop_node() {
  running || { rm -f "$node/pid"; return 0; }
  kill -TERM "$pid"  # Kafka's controlled shutdown
  waited=0
  while running; do
    if [ "$waited" -ge "${STOP_TIMEOUT:-120}" ]; then
      echo "node $id still ran ${STOP_TIMEOUT:-120}s after SIGTERM: killed" >&2
      kill -KILL "$pid" 2>/dev/null || true
      sleep 1
      break
    fi
    sleep 1
    waited=$((waited + 1))
  done
  rm -f "$node/pid"
}

start_node() {
  if running; then echo "node $id runs already (pid $pid)"; return 0; fi
  version=$(cat "$node/VERSION")
  libs=$FLEET/kafka-$version/libs
  [ -d "$libs" ] || { echo "Kafka $version is not installed here ($libs)" >&2; exit 1; }
  mkdir -p "$node/logs"
  [ ! -f "$node/logs/server.log" ] || mv "$node/logs/server.log" "$node/logs/server.log.previous"
  (IFS='
'; set -f; exec "$JAVA" $(cat "$node/jvm.options") -cp "$libs/*" kafka.Kafka "$node/server.properties") \
    >> "$node/logs/stdout.log" 2>&1 < /dev/null &
  echo $! > "$node/pid"
  waited=0
  while [ "$waited" -lt "${START_TIMEOUT:-180}" ]; do
    sleep 1
    waited=$((waited + 1))
    if ! running; then
      echo "node $id exited at start; the end of its logs:" >&2
      tail -n 20 "$node/logs/server.log" "$node/logs/stdout.log" >&2 2>/dev/null || true
      exit 1
    fi
    if grep -q "Kafka Server started" "$node/logs/server.log" 2>/dev/null; then
      echo "node $id started on Kafka $version (pid $pid) in ${waited}s"
      return 0
    fi
  done
  echo "node $id did not start within ${START_TIMEOUT:-180}s; the end of its log:" >&2
  tail -n 20 "$node/logs/server.log" >&2 2>/dev/null || true
  exit 1
}

case "$action" in
describe)
  if running; then state=running; else state=stopped; fi
  echo "$(cat "$node/VERSION") $state"
  ;;
stop) stop_node ;;
start) start_node ;;
roll)
  version=$3 config=$4
  [ -d "$FLEET/kafka-$version/libs" ] || { echo "Kafka $version is not installed here" >&2; exit 1; }
  cp "$config" "$node/overrides.properties.next"  # the deployer removes its file once this command returns
  stop_node
  mv "$node/overrides.properties.next" "$node/overrides.properties"
  cat "$node/base.properties" "$node/overrides.properties" > "$node/server.properties"
  echo "$version" > "$node/VERSION"
  start_node
  ;;
*)
  echo "usage: $0 roll ID VERSION CONFIG_FILE | describe ID | stop ID | start ID" >&2
  exit 2
  ;;
esac
"""


def properties(config: dict[str, str]) -> str:
    return "".join(properties_line(k, v) for k, v in config.items())


@dataclass(frozen=True)
class PlainFleet:
    """The fleet's directory (the script, each node's files, the release it runs) and how to reach it."""

    directory: Path
    bootstrap_servers: str
    exporters: dict[int, str]  # broker id -> the http://host:port of its JMX exporter agent

    @classmethod
    def create(cls, directory: Path, dist: KafkaDistribution) -> PlainFleet:
        """Writes the script and every node's files, and formats each node's storage; starts nothing. Raises
        SetupError when the release's tools fail."""
        directory = directory.resolve()
        controller_port, *ports = layout.free_ports(1 + 2 * len(BROKERS))
        client = dict(zip(BROKERS, ports[:len(BROKERS)], strict=True))
        metrics = dict(zip(BROKERS, ports[len(BROKERS):], strict=True))
        fleet = cls(directory, ",".join(f"127.0.0.1:{client[b]}" for b in BROKERS),
                    {b: f"http://127.0.0.1:{metrics[b]}" for b in BROKERS})
        (directory / f"kafka-{dist.version}").mkdir(parents=True)
        (directory / f"kafka-{dist.version}" / "libs").symlink_to(dist.libs)
        (directory / "fleet.env").write_text(f"JAVA={shlex.quote(distribution.require_java())}\n")
        (directory / SCRIPT).write_text(NODE_SCRIPT)
        (directory / SCRIPT).chmod(0o755)
        cluster_id = dist.run_tool(STORAGE_TOOL, ["random-uuid"]).strip()
        quorum = {"controller.quorum.voters": f"{CONTROLLER}@127.0.0.1:{controller_port}",
                  "controller.listener.names": "CONTROLLER"}
        fleet._node(dist, cluster_id, CONTROLLER, {
            "process.roles": "controller", "node.id": str(CONTROLLER), **quorum,
            "listeners": f"CONTROLLER://127.0.0.1:{controller_port}",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT"}, {}, [])
        for b in BROKERS:
            listener = f"PLAINTEXT://127.0.0.1:{client[b]}"
            fleet._node(dist, cluster_id, b, {
                "process.roles": "broker", "node.id": str(b), **quorum, "listeners": listener,
                "advertised.listeners": listener, "inter.broker.listener.name": "PLAINTEXT",
                "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT"},
                FLEET_CONFIG, [metrics_agent.agent_option(metrics[b])])
        return fleet

    def _node(self, dist: KafkaDistribution, cluster_id: str, node_id: int, base: dict[str, str],
              overrides: dict[str, str], agent: list[str]) -> None:
        node = self.directory / f"node-{node_id}"
        (node / "logs").mkdir(parents=True)
        base = base | {"log.dirs": str(node / "data")}
        (node / "base.properties").write_text(properties(base))
        (node / "overrides.properties").write_text(properties(overrides))
        (node / "server.properties").write_text(properties(base | overrides))
        (node / "VERSION").write_text(f"{dist.version}\n")
        # The marker of canary.process on the command line lets down() find every JVM of the fleet.
        jvm = [*FLEET_JVM_OPTS, f"-Dkafka.logs.dir={node / 'logs'}", *dist.log_config_props(tool=False),
               process.marker(self.directory, node_id), *agent]
        (node / "jvm.options").write_text("".join(f"{option}\n" for option in jvm))
        dist.run_tool(STORAGE_TOOL, ["format", "-t", cluster_id, "-c", str(node / "server.properties")])

    def command(self, action: str) -> str:
        """A command template that runs the fleet's script with `action` (placeholders as the deployer fills them)."""
        return f"{shlex.quote(str(self.directory / SCRIPT))} {action}"

    def cluster_section(self) -> dict:
        """The spec's cluster section: the command deployer running the fleet's script."""
        return {"deployer": "command", "bootstrap_servers": self.bootstrap_servers,
                "command": {"brokers": {b: "127.0.0.1" for b in BROKERS},
                            "roll": self.command("roll {broker_id} {version} {config_file}"),
                            "describe": self.command("describe {broker_id}"),
                            "stop": self.command("stop {broker_id}"), "start": self.command("start {broker_id}")}}

    def start(self) -> None:
        """Starts the controller, then each broker, through the script, as the platform team would; each start
        returns once its node has started. Raises CommandFailed with the end of the node's log."""
        for node_id in (CONTROLLER, *BROKERS):
            done = commands.run("start", self.command("start {node_id}"), {"node_id": node_id}, START_TIMEOUT)
            print(done.output, file=sys.stderr, flush=True)

    def down(self) -> list[int]:
        """Kills every process of the fleet, however it was started; returns their pids."""
        return process.kill_marked(f"{self.directory}#")


def spec_for(fleet: PlainFleet, canary: int, window: str, run_id: str):
    """The default spec but for the cluster, the no-op, the canary, the window and the judge's engine."""
    return load_spec({"cluster": fleet.cluster_section(), "change": {"config": NO_OP}, "canary": {"brokers": [canary]},
                      "probe": {"window": window}, "judge": {"engine": "inline"},
                      "broker_metrics": {"exporters": fleet.exporters}, "run_id": run_id})


def described(fleet: PlainFleet) -> list[dict]:
    """Each broker as the command deployer sees it: version, config overrides, rack (from the cluster), running."""
    deployer = spec_for(fleet, BROKERS[1], "2m", "describe").cluster.open_deployer()  # window and canary unused
    return [b.to_dict() | {"running": b.running} for b in deployer.brokers()]


def run_noop(fleet: PlainFleet, root: Path, attempt: int, window: str) -> dict:
    """One no-op rollout on the fleet, canary broker 2, then 3, ...; its row."""
    canary = 2 + attempt % 2
    run_id = f"no-op-{attempt}"
    rollout = Rollout(spec_for(fleet, canary, window, run_id), root / "runs" / run_id)
    result = run_all(BROKER, rollout)
    return {"run": attempt, "canary": canary, **decision_of(rollout, result)}


def acknowledged(user_traffic: UserTraffic | None) -> int:
    """Records of the user traffic acknowledged so far (its producer's log, <log_dir>/producer.log)."""
    if user_traffic is None:
        return 0
    with open(user_traffic.log_dir / "producer.log", errors="replace") as lines:
        report = parse_producer(lines)
    return report.acknowledged if report else 0


def summary(rows: list[dict]) -> str:
    """The markdown table of all runs: their verdicts (an INCONCLUSIVE one was rolled back), what decided each
    verdict other than PROMOTE."""
    verdicts = Counter(r["verdict"] for r in rows)
    deciding = Counter(m for r in rows if r["verdict"] != "PROMOTE" for m in r["failed"])
    decided = [r["decided_after_s"] for r in rows if r["decided_after_s"] is not None]
    return "\n".join([
        "| runs | PROMOTE | ROLLBACK | INCONCLUSIVE | what decided the verdicts other than PROMOTE | "
        "verdict after window start (s, median) | s per run (mean) |",
        "|---|---|---|---|---|---|---|",
        f"| {len(rows)} | {verdicts['PROMOTE']} | {verdicts['ROLLBACK']} | {verdicts['INCONCLUSIVE']} | "
        f"{', '.join(f'{m} ×{n}' for m, n in deciding.most_common()) or '-'} | "
        f"{statistics.median(decided) if decided else '-'} | "
        f"{round(statistics.mean(r['total_s'] for r in rows)) if rows else '-'} |"])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=20)
    p.add_argument("--traffic", type=int, default=0, help="records/s of 1 kB of real client traffic through the "
                                                          "fleet for all runs (0: an idle fleet)")
    p.add_argument("--window", default="2m")
    p.add_argument("--keep", type=Path, help="keep the fleet (its nodes' files and logs) and the runs' directories")
    args = p.parse_args()
    if args.keep and (args.keep / "fleet").exists():
        p.error(f"{args.keep} holds a fleet already: give --keep an empty or new directory")
    process.interrupt_on_sigterm()  # a `kill` of the bench still tears the fleet down
    dist = distribution.ensure(BASELINE_VERSION)
    rows, traffic_line, left_changed = [], None, None
    with tempfile.TemporaryDirectory(prefix="plain-fleet-") as tmp:
        root = (args.keep or Path(tmp)).resolve()
        fleet = PlainFleet.create(root / "fleet", dist)
        user_traffic = None
        try:
            fleet.start()
            if args.traffic:
                user_traffic = UserTraffic(dist, fleet.bootstrap_servers,
                                           TrafficSpec("orders", args.traffic, 1000, 8, 3), root / "traffic").start()
                time.sleep(SETTLE_S)
            before = described(fleet)
            for attempt in range(args.runs):
                if user_traffic:
                    user_traffic.check()
                started, acked = time.monotonic(), acknowledged(user_traffic)
                row = run_noop(fleet, root, attempt, args.window)
                row["total_s"] = round(time.monotonic() - started)
                # over the whole run: a producer stalled by the rolls shows here (its log has no line while it is)
                row["traffic_acked_per_s"] = round((acknowledged(user_traffic) - acked) / row["total_s"])
                rows.append(row)
                print(json.dumps(row), flush=True)
                if (after := described(fleet)) != before:  # the next runs would not be no-ops on this fleet
                    left_changed = f"run {attempt} left the fleet changed:\n  before {before}\n  after {after}"
                    break
        finally:
            if user_traffic:
                traffic_line = user_traffic.stop().line()
            killed = fleet.down()
            print(f"fleet down: {len(killed)} processes killed", file=sys.stderr)
    if traffic_line:
        print(f"\n{traffic_line}")
    print()
    print(summary(rows))
    if left_changed:
        sys.exit(left_changed)


if __name__ == "__main__":
    main()
