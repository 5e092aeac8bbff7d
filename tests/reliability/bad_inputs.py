"""The bad-input matrix: one table of cases (id, entry point, input, expected outcome) that
tests/reliability/test_bad_inputs.py runs and docs/bad-inputs.md is rendered from.

    .venv/bin/python tests/reliability/bad_inputs.py --write     # rewrite docs/bad-inputs.md from CASES

Entry points and what "caught" means for each:

- `trigger form`: the DAG's params as the API server validates a run's conf before the run exists
  (`SerializedDAG.params.deep_merge(conf).validate()`); values the form cannot judge (they need the judge config's
  rules or the cluster) pass it and are refused by the run's first task, `preflight`, before any change.
- `rollout spec`: `load_spec` (every field checked at once, no cluster needed), or the `preflight` step for checks
  that need the cluster, which run before the lock is taken or anything is changed.
- `CLI`: `kafka-canary …` exits 2 with one line on stderr.
- `connection extras`: the Airflow connection the rollout tasks read (KafkaCanaryHook), refused before any change.
- `observations`: records fed to the gate, through both engines (the inline judge of the rollout's interim looks
  and `engine: inline`, and the Spark job); each bad record is excluded, counted per reason in the verdict's
  `data_quality`, and named in the verdict's reason; the analysis never crashes on them.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
# Exit codes of a CLI error (one line on stderr): 2 before any run, 4 a run stopped unfinished (canary.outcome).
ERROR_CODES = (2, 4)
DOC = REPO / "docs" / "bad-inputs.md"


@dataclass(frozen=True)
class RawSpec:
    """A spec file with exactly this text."""
    text: str

    def __str__(self) -> str:
        return f"file: {self.text}"


@dataclass(frozen=True)
class MissingFile:
    def __str__(self) -> str:
        return "--spec /nonexistent/rollout.yaml"


@dataclass(frozen=True)
class Cli:
    """`kafka-canary ARGV`; `{spec}` in argv is a spec file made from `spec` (merged over a good spec, its cluster
    the test's), `{tmp}` a fresh directory, `{empty}` an empty file, `{theirs}` (also inside an argument) a directory
    holding another tool's report.html and audit.jsonl, which must be left exactly as it was, `{rolled-back}` a run
    directory of the spec's run that decided ROLLBACK (its canary roll failed) and whose rollback failed, which
    must gain no step. `code`: the exit code; 2 (an error) or 4 (an error that stopped a run unfinished: the run was
    opened, a step failed or was refused) means one line on stderr, another code means a verdict
    printed on stdout and nothing at all on stderr. `shown`: the spec as the docs describe it, instead of its JSON."""
    argv: tuple[str, ...]
    env: dict = field(default_factory=dict)
    spec: dict | None = None
    code: int = 2
    shown: str = ""

    def __str__(self) -> str:
        env = " ".join(f"{k}={v}" for k, v in self.env.items())
        argv = [{"{spec}": "rollout.yaml", "{tmp}": "out/", "{busy-port}": "P", "{empty}": "empty.jsonl",
                 "{huge}": "huge.yaml", "{rolled-back}": "run/"}.get(a, a).replace("{theirs}", "/srv/theirs")
                for a in self.argv]
        spec = f" with rollout.yaml {self.shown or json.dumps(self.spec)}" if self.spec else ""
        return (env + " " if env else "") + "kafka-canary " + " ".join(argv) + spec


# A fleet the command deployer reaches (nothing is run: the cases refuse before any command or cluster call).
COMMAND_FLEET = {"cluster": {"deployer": "command", "bootstrap_servers": "127.0.0.1:9", "command": {
    "brokers": {1: "k1", 2: "k2"}, "roll": "kafka-roll {host} {version} {config_file}",
    "describe": "kafka-describe {host}"}}}


def ssh_fleet(**command: object) -> dict:
    """A spec of a command-deployer fleet reached over ssh, with `command`'s fields replacing the usual ones."""
    return {"cluster": {"deployer": "command", "bootstrap_servers": "k1:9092", "command": {
        "brokers": {1: "k1"}, "roll": "ssh {host} kafka-roll {version} < {config_file}",
        "describe": "ssh {host} kafka-describe"} | command}}


@dataclass(frozen=True)
class Obs:
    """Observations: a good two-lane run (unless `lanes` leaves a lane out) plus `add` records: a str is a raw
    line, a dict overrides fields of a good canary record (times: `now+1d`, `send-500` = 500 ms before its send);
    `edit` overrides fields of every record of one lane."""
    add: tuple = ()
    lanes: tuple[str, ...] = ("canary", "baseline")
    edit: tuple[str, dict] | None = None

    def __str__(self) -> str:
        parts = [r if isinstance(r, str) else json.dumps(r) for r in self.add]
        if len(parts) and all(p == parts[0] for p in parts):
            parts = [parts[0] + (f" ×{len(parts)}" if len(parts) > 1 else "")]
        if self.lanes != ("canary", "baseline"):
            parts.append(f"lanes: {', '.join(self.lanes) or 'none'}")
        if self.edit:
            parts.append(f"every {self.edit[0]} record: {json.dumps(self.edit[1])}")
        return "; ".join(parts)


@dataclass(frozen=True)
class Case:
    id: str
    entry: str          # trigger form | rollout spec | CLI | connection extras | observations
    what: str           # the bad input in words
    input: Any
    expect: str         # in the error message; for observations the exclusion reason or a phrase of the verdict
    stage: str = ""     # trigger form: "preflight task" when the form passes it; rollout spec: "preflight"
    cluster: bool = False  # reaches the real cluster (integration test, the cluster checked unchanged after)
    excluded: int = 0   # observations: how many records the verdict must count as `expect`

    def outcome(self) -> str:
        quoted = f"`{self.expect}`"
        if self.entry == "trigger form":
            return (f"refused by the form, no run created: {quoted}" if not self.stage else
                    f"passes the form; the run's preflight task fails before any change: {quoted}")
        if self.entry == "rollout spec":
            return (f"refused by `load_spec`: {quoted}" if not self.stage else
                    f"refused by preflight before the lock or any change: {quoted}")
        if self.entry == "CLI" and self.input.code not in ERROR_CODES:
            return f"exit {self.input.code}, nothing on stderr (no log, no warning): {quoted}"
        if self.entry == "CLI":
            return f"exit {self.input.code}, one line on stderr: {quoted}"
        if self.entry == "connection extras":
            return f"the task fails before any change: {quoted}"
        if self.excluded:
            return (f"{self.excluded} record(s) excluded, counted as {quoted} in `data_quality.excluded` and named "
                    f"in the verdict's reason (inline judge and Spark job)")
        return f"INCONCLUSIVE, never PROMOTE: {quoted} (inline judge and Spark job)"


CASES: tuple[Case, ...] = (
    # ----- the trigger form (DAG params) -----
    Case("form-canary-count-zero", "trigger form", "canary count 0", {"canary_count": 0},
         "param canary_count: 0 is less than the minimum of 1"),
    Case("form-canary-count-fraction", "trigger form", "canary count not a whole number", {"canary_count": 1.5},
         "param canary_count: 1.5 is not of type 'null', 'integer'"),
    Case("form-window-words", "trigger form", "window in words", {"window": "two minutes"},
         "param window: 'two minutes' does not match"),
    Case("form-version-latest", "trigger form", "target version not a release number", {"target_version": "latest"},
         "param target_version: 'latest' does not match"),
    Case("form-probe-rate-negative", "trigger form", "negative probe rate", {"probe_rate": -5},
         "param probe_rate: -5 is less than the minimum of 0.1"),
    Case("form-probe-rate-text", "trigger form", "probe rate as text", {"probe_rate": "fast"},
         "param probe_rate: 'fast' is not of type 'number'"),
    Case("form-engine-unknown", "trigger form", "unknown analysis engine", {"engine": "pandas"},
         "param engine: 'pandas' is not one of ['spark', 'inline']"),
    Case("form-overrides-not-object", "trigger form", "config overrides as a string",
         {"config_overrides": "num.io.threads=6"},
         "param config_overrides: 'num.io.threads=6' is not of type 'object'"),
    Case("form-brokers-duplicated", "trigger form", "canary broker id listed twice", {"canary_brokers": [2, 2]},
         "param canary_brokers: [2, 2] has non-unique elements"),
    Case("form-control-word", "trigger form", "control brokers as an unknown word", {"canary_control": "some"},
         "param canary_control: 'some' is not one of ['auto', 'none']"),
    Case("form-brokers-negative", "trigger form", "negative canary broker id", {"canary_brokers": [-1]},
         "param canary_brokers: -1 is less than the minimum of 0"),
    Case("form-delay-too-long", "trigger form", "fault delay above 60 s", {"client_delay_ms": 120000},
         "param client_delay_ms: 120000 is greater than the maximum of 60000"),
    Case("form-connection-empty", "trigger form", "empty cluster connection id", {"cluster_conn_id": ""},
         "param cluster_conn_id: '' should be non-empty"),
    Case("form-unknown-param", "trigger form", "misspelt param in the run's conf", {"canary_cout": 2},
         "canary_cout: unknown param; known params are", stage="preflight task"),
    Case("form-judge-alpha", "trigger form", "judge alpha out of range", {"judge_config": {"alpha": 7}},
         "judge.config: alpha: Input should be less than 0.5 (got 7)", stage="preflight task"),
    Case("form-judge-wrong-type", "trigger form", "judge field of the wrong type",
         {"judge_config": {"metrics": {"e2e_latency_p99": {"critical": "yes"}}}},
         "judge.config: metrics.e2e_latency_p99.critical: Input should be a valid boolean (got 'yes')",
         stage="preflight task"),
    Case("form-interim-longer", "trigger form", "interim look interval longer than the window",
         {"window": "30s", "interim_interval": "60s"},
         "probe: interim_interval 60s is longer than the window 30s", stage="preflight task"),
    Case("form-window-too-short", "trigger form", "window shorter than 10 s", {"window": "1s"},
         "probe.window: '1s' must be a duration between 10s and 24h, such as 30s or 2m", stage="preflight task"),
    Case("form-no-change", "trigger form", "neither a version nor config overrides",
         {"target_version": None, "config_overrides": {}}, "change: say what changes", stage="preflight task"),
    Case("form-config-trailing-backslash", "trigger form",
         "a config value ending in a backslash (Java properties join the next line to it: an override lost)",
         {"config_overrides": {"a.custom.note": "x\\", "log.retention.ms": "3600000"}},
         "change.config.a.custom.note: a value must not end in a backslash", stage="preflight task"),
    Case("form-canary-count-all", "trigger form", "canary count = the cluster's broker count", {"canary_count": 3},
         "canary.count: 3 canary broker(s) on a 3-broker cluster leaves no baseline to compare with; choose at most 2",
         stage="preflight task", cluster=True),

    # ----- the rollout spec -----
    Case("spec-missing-file", "rollout spec", "spec file missing", MissingFile(),
         "cannot read the spec file /nonexistent/rollout.yaml: No such file or directory"),
    Case("spec-not-yaml", "rollout spec", "spec file not YAML (one line naming where)", RawSpec("cluster: [unclosed"),
         "is not valid YAML/JSON: line 1, column 19: expected ',' or ']', but got '<stream end>'"),
    Case("spec-not-mapping", "rollout spec", "spec a list", RawSpec("- cluster\n- change\n"),
         "the spec must be a mapping with cluster, change, canary"),
    Case("spec-unknown-field", "rollout spec", "unknown field", {"colour": "blue"},
         "colour: unknown field; known fields are"),
    Case("spec-brokers-duplicated", "rollout spec", "duplicated canary broker ids", {"canary": {"brokers": [1, 2, 1]}},
         "canary.brokers: broker ids [1] are listed twice"),
    Case("spec-count-and-brokers", "rollout spec", "both canary count and broker ids",
         {"canary": {"count": 1, "brokers": [2]}}, "give exactly one of canary.count"),
    Case("spec-version-malformed", "rollout spec", "version not MAJOR.MINOR.PATCH", {"change": {"version": "4.1"}},
         "change.version: Kafka version '4.1' is not a release number"),
    Case("spec-version-too-old", "rollout spec", "version older than KRaft support", {"change": {"version": "3.6.0"}},
         "change.version: Kafka 3.6.0 is too old"),
    Case("spec-rate-zero", "rollout spec", "probe rate 0", {"probe": {"rate": 0}},
         "probe.rate: Input should be greater than or equal to 0.1 (got 0)"),
    Case("spec-batch-of-none", "rollout spec", "promotion batches of no broker", {"promote": {"max_batch": 0}},
         "promote.max_batch: Input should be greater than or equal to 1 (got 0)"),
    Case("spec-headroom-negative", "rollout spec", "a negative headroom above min ISR", {"promote": {"headroom": -1}},
         "promote.headroom: Input should be greater than or equal to 0 (got -1)"),
    Case("spec-waves-shrinking", "rollout spec", "promotion waves that do not grow",
         {"promote": {"waves": ["50%", "25%"]}},
         "promote.waves: each wave must be a larger share of the brokers than the one before"),
    Case("spec-waves-all-first", "rollout spec", "a promotion wave after all", {"promote": {"waves": ["all", "50%"]}},
         'promote.waves: "all" can only be the last wave'),
    Case("spec-catch-up-text", "rollout spec", "catch-up reads sized in words", {"traffic": {"catch_up_bytes": "2MB"}},
         "traffic.catch_up_bytes: Input should be a valid integer (got '2MB')"),
    Case("spec-catch-up-no-partitions", "rollout spec", "catch-up reads of no partition",
         {"traffic": {"catch_up_partitions": 0}},
         "traffic.catch_up_partitions: Input should be greater than or equal to 1 (got 0)"),
    Case("spec-deployer-unknown", "rollout spec", "unknown deployer", {"cluster": {"deployer": "k8s", "dir": "/c"}},
         "cluster.deployer: Input should be 'local', 'docker' or 'command' (got 'k8s')"),
    Case("spec-command-roll-ignores-config", "rollout spec",
         "a command deployer's roll that takes no version or config",
         ssh_fleet(roll="ssh {host} systemctl restart kafka"),
         "cluster.command.roll: must use {version} and {config_file} or {config_json}"),
    Case("spec-command-unknown-placeholder", "rollout spec", "a command template with an unknown placeholder",
         ssh_fleet(roll="kafka-roll {host} {version} {config_file}", describe="ssh {hostname} kafka-describe"),
         "cluster.command.describe: uses {hostname}; a describe command may use {broker_id}, {host}, {node_id}, "
         "{role}"),
    Case("spec-command-host-is-an-option", "rollout spec", "a host that ssh would take for an option",
         ssh_fleet(brokers={1: "-oProxyCommand=touch /tmp/x"}),
         "cluster.command.brokers.1: '-oProxyCommand=touch /tmp/x' must be a host name or address"),
    Case("spec-command-host-runs-a-command", "rollout spec", "a host holding shell syntax",
         ssh_fleet(brokers={1: "k1$(id)"}),
         "cluster.command.brokers.1: 'k1$(id)' must be a host name or address"),
    Case("spec-command-quoted-placeholder", "rollout spec", "a template that quotes a placeholder",
         ssh_fleet(roll='ssh {host} "kafka-roll {version} {config_json}"'),
         "cluster.command.roll: writes {version}, {config_json} inside quotes; write placeholders bare"),
    Case("spec-command-no-bootstrap", "rollout spec", "a command deployer without bootstrap servers",
         {"cluster": {"deployer": "command", "command": {
             "brokers": {1: "k1"}, "roll": "kafka-roll {host} {version} {config_file}", "describe": "kafka-describe"}}},
         "cluster.bootstrap_servers: is required with deployer command"),
    Case("spec-judge-text-number", "rollout spec", "judge threshold as text",
         {"judge": {"config": {"metrics": {"e2e_latency_p99": {"rel_floor": "big"}}}}},
         "judge.config: metrics.e2e_latency_p99.rel_floor: Input should be a valid number (got 'big')"),
    Case("spec-judge-span-not-broker", "rollout spec", "a judge span on a metric that is not a broker's",
         {"judge": {"config": {"metrics": {"e2e_latency_p99": {"span_s": 20}}}}},
         "judge.config: metrics.e2e_latency_p99: per, compare, settle_s and span_s are for broker metrics, not "
         "quantile"),
    Case("spec-run-id-spaces", "rollout spec", "run id with spaces", {"run_id": "my rollout"},
         "run_id: 'my rollout' must be 1-100 letters"),
    Case("spec-config-line-break", "rollout spec", "a config value with a line break (a second line injected)",
         {"change": {"config": {"message.max.bytes": "1000000\nbroker.rack=x:canary-broker"}}},
         "change.config.message.max.bytes: a value must be one line"),
    Case("spec-config-trailing-backslash", "rollout spec",
         "a config value ending in a backslash (Java properties join the next line to it: the next override lost)",
         {"change": {"config": {"a.custom.note": "x\\", "log.retention.ms": "3600000"}}},
         "change.config.a.custom.note: a value must not end in a backslash (a trailing backslash joins the next line"),
    Case("spec-config-managed", "rollout spec", "a managed config key (the canary marker's rack)",
         {"change": {"config": {"broker.rack": "x:canary-broker"}}},
         "change.config.broker.rack: managed by the deployer"),
    Case("spec-unknown-broker", "rollout spec", "canary broker id the cluster does not have",
         {"canary": {"brokers": [7]}},
         "canary.brokers: [7] are not brokers of this cluster; its broker ids are [1, 2, 3]",
         stage="preflight", cluster=True),
    Case("spec-window-too-short", "rollout spec", "a window too short for the judge ever to promote",
         {"probe": {"window": "20s", "interim_interval": "10s"}, "judge": {"engine": "inline"}},
         "probe.window 20s can never promote"),
    Case("spec-control-is-canary", "rollout spec", "a control broker that is also a canary broker",
         {"canary": {"brokers": [3], "control": [3]}}, "brokers [3] are listed as canary and as control"),
    Case("spec-control-leaves-none", "rollout spec", "control brokers that leave no broker untouched",
         {"canary": {"brokers": [3], "control": [1, 2]}},
         "canary.control: 2 control and 1 canary broker(s) on a 3-broker cluster leave no broker untouched",
         stage="preflight", cluster=True),
    Case("spec-count-above-brokers", "rollout spec", "canary count above the broker count", {"canary": {"count": 5}},
         "canary.count: 5 canary broker(s) on a 3-broker cluster leaves no baseline", stage="preflight", cluster=True),
    Case("spec-unreleased-version", "rollout spec", "a version never released", {"change": {"version": "9.9.9"}},
         "Kafka 9.9.9 is not a released version on Maven Central", stage="preflight", cluster=True),
    Case("spec-config-value-the-broker-refuses", "rollout spec",
         "a config value the broker would refuse at start (it cost a canary restart and said only 'not registered')",
         {"change": {"config": {"num.io.threads": ".nan"}}},
         "num.io.threads: Invalid value .nan for configuration num.io.threads: Not a number of type INT",
         stage="preflight", cluster=True),
    Case("spec-static-config-value-the-broker-refuses", "rollout spec",
         "a static key's value below the broker's minimum", {"change": {"config": {"log.segment.bytes": "10"}}},
         "log.segment.bytes: Invalid value 10 for configuration log.segment.bytes: Value must be at least",
         stage="preflight", cluster=True),
    Case("spec-lead-topic-missing", "rollout spec", "lead topic that does not exist",
         {"lead_topics": ["orders-that-do-not-exist"]},
         "lead_topics ['orders-that-do-not-exist'] do not exist on the cluster", stage="preflight", cluster=True),
    Case("spec-load-rate-word", "rollout spec", "a load rate that is neither a number nor auto",
         {"load": {"rate": "fast"}},
         "load.rate: 'fast' must be records/s per partition from 0 (no load) to 100000, or auto"),
    Case("spec-prometheus-credentials", "rollout spec", "Prometheus URL with a password in it",
         {"broker_metrics": {"prometheus": {"url": "http://admin:s3cret@127.0.0.1:9090", "brokers": {1: "a"}}}},
         "broker_metrics.prometheus.url: must not carry credentials (user:password@ in the URL, not repeated "
         "here); put an Authorization header in $KAFKA_CANARY_PROMETHEUS_AUTHORIZATION"),
    Case("spec-docker-host-credentials", "rollout spec", "a Docker engine URL with a password in it (it was printed "
         "twice)", {"cluster": {"deployer": "docker", "docker": {"name": "prod", "host": "tcp://admin:s3cret@h:2376"}}},
         "cluster.docker.host: must not carry credentials (user:password@ in the URL, not repeated here); a tcp:// "
         "engine authenticates with TLS certificates"),
    Case("spec-prometheus-unreachable", "rollout spec", "broker metrics from a Prometheus nobody serves",
         {"broker_metrics": {"prometheus": {"url": "http://127.0.0.1:1", "brokers": {1: "a", 2: "b", 3: "c"}}}},
         "broker_metrics: cannot reach Prometheus at http://127.0.0.1:1", stage="preflight", cluster=True),
    Case("spec-prometheus-unmapped-broker", "rollout spec", "a broker without a Prometheus label value",
         {"broker_metrics": {"prometheus": {"url": "http://127.0.0.1:1", "brokers": {1: "a"}}}},
         "broker_metrics.prometheus.brokers: brokers [2, 3] have no label value", stage="preflight", cluster=True),

    # issue 35, items 5 and "accepted but wrong": bounded input, no alias expansion, no silent duplicates
    Case("spec-alias-bomb", "rollout spec", "a YAML alias bomb (\"billion laughs\") in a spec field",
         RawSpec("run_id:\n  a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n"
                 "  b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n  c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\n"
                 "  d: [*c, *c, *c, *c, *c, *c, *c, *c, *c]\n"),
         "is not valid YAML/JSON: line 3, column 10: an alias (*a) is not allowed in a spec; write the value out"),
    Case("spec-duplicate-key-yaml", "rollout spec", "a key given twice in YAML (the last won in silence)",
         RawSpec("canary: {count: 1}\ncanary: {brokers: [3]}\n"),
         "is not valid YAML/JSON: line 2, column 1: duplicate key 'canary' (first on line 1); give each key once"),
    Case("spec-duplicate-key-json", "rollout spec", "a key given twice in JSON",
         RawSpec('{"probe": {"window": "2m", "window": "10m"}}'),
         "is not valid YAML/JSON: line 1, column 28: duplicate key 'window' (first on line 1); give each key once"),
    Case("spec-exponent-number", "rollout spec", "a JSON number with an exponent (YAML 1.1 read `1e5` as text)",
         RawSpec("probe: {rate: 1e5}\n"),
         "probe.rate: Input should be less than or equal to 10000 (got 100000.0)"),
    Case("spec-broker-id-negative", "rollout spec", "canary broker id -1", {"canary": {"brokers": [-1]}},
         "canary.brokers.0: -1 is not a broker id: a whole number from 0 to 2147483647"),
    Case("spec-broker-id-huge", "rollout spec", "canary broker id 1e20 (beyond any Kafka node id)",
         RawSpec("canary: {brokers: [1e20]}\n"),
         "canary.brokers.0: 1e+20 is not a broker id: a whole number from 0 to 2147483647"),
    Case("spec-image-unknown-placeholder", "rollout spec", "a docker image template with an unknown placeholder",
         {"cluster": {"deployer": "docker", "docker": {"name": "kc", "image": "apache/kafka:{version}-{tag}"}}},
         "cluster.docker.image: uses {tag}; an image template may use only {version}"),

    # ----- the CLIs -----
    Case("cli-restart-config-not-a-key", "CLI", "restart-broker --config with a key that is no config name",
         Cli(("cluster", "restart-broker", "2", "--config", "NOT A KEY=1", "--dir", "{tmp}")),
         "--config: 'NOT A KEY' is not a broker config name"),
    Case("cli-restart-config-line-break", "CLI", "restart-broker --config value with a line break",
         Cli(("cluster", "restart-broker", "2", "--config", "message.max.bytes=1000000\nbroker.rack=x:canary-broker",
              "--dir", "{tmp}")),
         "'message.max.bytes': a value must be one line"),
    Case("cli-restart-config-trailing-backslash", "CLI",
         "restart-broker --config value ending in a backslash (it swallowed the next --config, the cluster said "
         "healthy)",
         Cli(("cluster", "restart-broker", "2", "--config", "a.custom.note=x\\", "--config",
              "log.retention.ms=3600000", "--dir", "{tmp}")),
         "--config: 'a.custom.note': a value must not end in a backslash"),
    Case("cli-release-config-trailing-backslash", "CLI", "release --config value ending in a backslash",
         Cli(("release", "--cluster", "prod", "--version", "4.1.2", "--config", "a.custom.note=x\\"),
             env={"AIRFLOW_API_TOKEN": "t"}),
         "config_overrides.a.custom.note: a value must not end in a backslash"),
    Case("cli-run-dir-foreign", "CLI", "--run-dir a folder of another tool's report.html and audit.jsonl (left as "
         "it was, no lock file)",
         Cli(("rollout", "preflight", "--spec", "{spec}", "--run-dir", "{theirs}")),
         "already holds files that are no run of kafka-canary's (audit.jsonl, report.html) and no run.json; a run "
         "directory must be new, empty or a run of kafka-canary's"),
    Case("cli-run-dir-foreign-url", "CLI", "--run-dir file:// URL of such a directory, through `rollout run`",
         Cli(("rollout", "run", "--spec", "{spec}", "--run-dir", "file://{theirs}")),
         "already holds files that are no run of kafka-canary's (audit.jsonl, report.html)"),
    Case("cli-run-dir-device", "CLI", "--run-dir not a directory", Cli(("rollout", "run", "--spec", "{spec}",
                                                                        "--run-dir", "/dev/null")),
         "run storage file:///dev/null: /dev/null is not a directory, so it cannot hold a run"),
    Case("cli-run-dir-credentials", "CLI", "--run-dir an http URL with a password in it",
         Cli(("rollout", "run", "--spec", "{spec}", "--run-dir", "http://admin:s3cret@127.0.0.1:9/runs")),
         "storage URL: must not carry credentials (user:password@ in the URL, not repeated here); give an object "
         "store's credentials as AWS_ACCESS_KEY_ID"),
    Case("cli-run-dir-s3-credentials", "CLI", "--run-dir an s3 URL with the key and secret in it (it was shown in a "
         "botocore traceback)", Cli(("rollout", "preflight", "--spec", "{spec}", "--run-dir",
                                     "s3://AKIAKEY:s3cret@bucket/x")),
         "storage URL: must not carry credentials"),
    Case("cli-resume-rolled-back-deploy", "CLI",
         "a step towards the change on a run that decided ROLLBACK, its rollback failed (it re-deployed, promoted)",
         Cli(("rollout", "deploy-canary", "--spec", "{spec}", "--run-dir", "{rolled-back}"), spec=COMMAND_FLEET,
             shown="(a command-deployer fleet)", code=4),
         "decided ROLLBACK (deploy-canary failed: ssh: connect to host k2 port 22: Connection refused), so "
         "deploy-canary may not run: the run can only finish its rollback"),
    Case("cli-resume-rolled-back-promote", "CLI", "promote --approve on a run that decided ROLLBACK",
         Cli(("rollout", "promote", "--approve", "--spec", "{spec}", "--run-dir", "{rolled-back}"),
             spec=COMMAND_FLEET, shown="(a command-deployer fleet)", code=4),
         "so promote may not run: the run can only finish its rollback"),
    Case("cli-rollout-no-spec", "CLI", "rollout without --spec", Cli(("rollout", "run")),
         "the following arguments are required: --spec"),
    Case("cli-rollout-bad-choice", "CLI", "unknown --on-inconclusive", Cli(("rollout", "run", "--spec", "x.yaml",
                                                                           "--on-inconclusive", "maybe")),
         "argument --on-inconclusive: invalid choice: 'maybe'"),
    Case("cli-rollout-missing-spec", "CLI", "spec file missing",
         Cli(("rollout", "preflight", "--spec", "/nonexistent/rollout.yaml")), "cannot read the spec file"),
    Case("cli-rollout-no-cluster", "CLI", "spec naming a directory without a cluster",
         Cli(("rollout", "preflight", "--spec", "{spec}", "--run-dir", "{tmp}"),
             spec={"cluster": {"dir": "/nonexistent/kafka-canary-cluster"}}),
         "no cluster in /nonexistent/kafka-canary-cluster"),
    Case("cli-rollout-controller-as-canary", "CLI", "a controller's id as canary broker",
         Cli(("rollout", "preflight", "--spec", "{spec}", "--run-dir", "{tmp}"), spec={"canary": {"brokers": [3000]}}),
         "canary.brokers: [3000] are not brokers of this cluster", cluster=True),
    Case("cli-analyze-missing-observations", "CLI", "observations path missing",
         Cli(("analyze", "--observations", "/nonexistent/obs.jsonl", "--out", "{tmp}")),
         "--observations /nonexistent/obs.jsonl does not exist"),
    Case("cli-analyze-bad-from", "CLI", "window start not a time",
         Cli(("analyze", "--observations", "kafka://127.0.0.1:9", "--from", "yesterday", "--out", "{tmp}")),
         "--from 'yesterday' is neither epoch milliseconds nor an ISO-8601 time"),
    Case("cli-analyze-empty-window", "CLI", "window start after its end",
         Cli(("analyze", "--observations", "kafka://127.0.0.1:9", "--from", "2000", "--to", "1000", "--out", "{tmp}")),
         "--from 2000 is not before --to 1000"),
    Case("cli-analyze-missing-config", "CLI", "judge config missing",
         Cli(("analyze", "--observations", "kafka://127.0.0.1:9", "--config", "/nonexistent/judge.yaml",
              "--out", "{tmp}")), "cannot read judge config /nonexistent/judge.yaml"),
    Case("cli-analyze-bad-master", "CLI", "Spark master not a master URL",
         Cli(("analyze", "--observations", "{spec}", "--out", "{tmp}", "--master", "nonsense://x")),
         "--master 'nonsense://x' is not a Spark master"),
    Case("cli-analyze-empty-file", "CLI", "an empty observations file (judged at once: no 12 s Spark job, no log "
         "lines, no warning)", Cli(("analyze", "--observations", "{empty}", "--out", "{tmp}"), code=3),
         "INCONCLUSIVE (score 0.0): no valid observations in the window"),
    Case("cli-release-bad-version", "CLI", "release version not a release number",
         Cli(("release", "--cluster", "prod", "--version", "latest")), "--version 'latest' is not a Kafka release"),
    Case("cli-release-bad-timeout", "CLI", "release timeout not a duration",
         Cli(("release", "--cluster", "prod", "--timeout", "forever")), "--timeout: duration 'forever' is not like"),
    Case("cli-release-bad-config", "CLI", "release --config without =",
         Cli(("release", "--cluster", "prod", "--config", "novalue"), env={"AIRFLOW_API_TOKEN": "t"}),
         "--config 'novalue' is not KEY=VALUE"),
    Case("cli-release-no-credentials", "CLI", "release without Airflow credentials",
         Cli(("release", "--cluster", "prod", "--version", "4.1.2")), "no Airflow credentials: set AIRFLOW_API_TOKEN"),
    Case("cli-release-unreachable", "CLI", "Airflow not reachable",
         Cli(("release", "--cluster", "prod", "--version", "4.1.2", "--airflow-url", "http://127.0.0.1:9"),
             env={"AIRFLOW_API_TOKEN": "t"}),
         "cannot reach Airflow at http://127.0.0.1:9"),
    Case("cli-release-bad-params", "CLI", "release params the DAG's form refuses (checked before Airflow is asked)",
         Cli(("release", "--cluster", "prod", "--version", "4.1.2", "--param", "canary_count=0"),
             env={"AIRFLOW_API_TOKEN": "t"}),
         "canary_count: Input should be greater than or equal to 1 (got 0)"),
    Case("cli-release-nothing-changes", "CLI", "release with neither a version nor a config change",
         Cli(("release", "--cluster", "prod"), env={"AIRFLOW_API_TOKEN": "t"}),
         "target_version / config_overrides: say what changes"),
    Case("cli-release-poll-text", "CLI", "release --poll not a number", Cli(("release", "--poll", "often")),
         "argument --poll: invalid float value: 'often'"),
    Case("cli-release-url-credentials", "CLI", "release --airflow-url with a password in it",
         Cli(("release", "--cluster", "prod", "--version", "4.1.2", "--airflow-url",
              "http://admin:s3cret@127.0.0.1:9"), env={"AIRFLOW_API_TOKEN": "t"}),
         "the Airflow URL (--airflow-url, $AIRFLOW_URL): must not carry credentials (user:password@ in the URL, not "
         "repeated here); set AIRFLOW_API_TOKEN"),
    Case("cli-release-poll-negative", "CLI", "release --poll -1 (it crashed)",
         Cli(("release", "--cluster", "prod", "--version", "4.1.2", "--poll", "-1")),
         "argument --poll: '-1' must be seconds from 0.5 to 600"),
    Case("cli-release-poll-nan", "CLI", "release --poll nan (it crashed)",
         Cli(("release", "--cluster", "prod", "--version", "4.1.2", "--poll", "nan")),
         "argument --poll: 'nan' must be seconds from 0.5 to 600"),
    Case("cli-release-poll-zero", "CLI", "release --poll 0 (it flooded Airflow with requests)",
         Cli(("release", "--cluster", "prod", "--version", "4.1.2", "--poll", "0")),
         "argument --poll: '0' must be seconds from 0.5 to 600"),
    Case("cli-sweep-history-credentials", "CLI", "sweep --history a URL with a password in it",
         Cli(("sweep", "--bootstrap-servers", "127.0.0.1:9", "--history", "http://u:s3cret@127.0.0.1:9/h")),
         "history: must not carry credentials (user:password@ in the URL, not repeated here)"),
    Case("cli-probe-bootstrap-credentials", "CLI", "probe bootstrap servers with user:password@ (the banner showed it)",
         Cli(("probe", "--bootstrap-servers", "admin:s3cret@127.0.0.1:9", "--duration", "1s")),
         "bootstrap servers: must not carry credentials (user:password@ in the URL, not repeated here); put SASL "
         "credentials in sasl.username and sasl.password"),
    Case("cli-probe-rate-inf", "CLI", "probe --rate inf (it crashed)",
         Cli(("probe", "--bootstrap-servers", "127.0.0.1:9", "--rate", "inf")),
         "argument --rate: rate must be > 0 and finite (messages/s per partition), got 'inf'"),
    Case("cli-probe-http-port-range", "CLI", "probe --http-port 70000 (it crashed)",
         Cli(("probe", "--bootstrap-servers", "127.0.0.1:9", "--http-port", "70000")),
         "argument --http-port: 70000 is not a port: give 0 (any free port) to 65535"),
    Case("cli-probe-observations-dir", "CLI", "probe --observations-file a directory (it crashed)",
         Cli(("probe", "--bootstrap-servers", "127.0.0.1:9", "--observations-file", "{theirs}")),
         "is a directory: give a file to append observations to"),
    Case("cli-probe-empty-client-env", "CLI", "KAFKA_CANARY_CLIENT_=x, a client setting without a name (it crashed)",
         Cli(("probe", "--bootstrap-servers", "127.0.0.1:9", "--duration", "1s"), env={"KAFKA_CANARY_CLIENT_": "x"}),
         "environment variable 'KAFKA_CANARY_CLIENT_' names no client setting: write KAFKA_CANARY_CLIENT_<KEY>"),
    Case("cli-probe-bad-duration", "CLI", "probe duration not a duration",
         Cli(("probe", "--bootstrap-servers", "127.0.0.1:9", "--duration", "5minutes")),
         "duration '5minutes' is not like 60s, 5m, 1h or 250ms"),
    Case("cli-probe-rate-zero", "CLI", "probe rate 0", Cli(("probe", "--bootstrap-servers", "127.0.0.1:9",
                                                            "--rate", "0")), "rate must be > 0"),
    Case("cli-probe-http-port-taken", "CLI", "probe --http-port another process listens on (checked before the "
         "cluster is touched: no topic created)",
         Cli(("probe", "--bootstrap-servers", "127.0.0.1:9", "--duration", "1s", "--http-port", "{busy-port}")),
         "(the probe's HTTP endpoints) is already in use; free it or choose another --http-port"),
    Case("cli-probe-no-bootstrap", "CLI", "probe without bootstrap servers", Cli(("probe", "--duration", "1s")),
         "bootstrap servers are missing: pass --bootstrap-servers"),
    Case("cli-probe-missing-config", "CLI", "probe config file missing",
         Cli(("probe", "--bootstrap-servers", "127.0.0.1:9", "--config", "/nonexistent/probe.properties")),
         "cannot read config file /nonexistent/probe.properties"),
    Case("cli-probe-oversize-message", "CLI", "probe message size above 900 kB",
         Cli(("probe", "--bootstrap-servers", "127.0.0.1:9", "--message-size", "2000000")),
         "message size must be 0..900000 bytes"),

    # issue 35, item 5: a spec, judge config or observations file that never ends, or is huge, or is echoed back
    Case("cli-spec-dev-zero", "CLI", "/dev/zero as the spec (read forever)",
         Cli(("rollout", "preflight", "--spec", "/dev/zero")),
         "cannot read the spec file /dev/zero: is a device, pipe or socket, not a regular file; give a YAML or JSON "
         "spec"),
    Case("cli-spec-huge", "CLI", "a 50 MB spec file", Cli(("rollout", "preflight", "--spec", "{huge}")),
         "huge.yaml: is larger than 1 MiB; a YAML or JSON spec is a few kilobytes"),
    Case("cli-spec-long-value-echo", "CLI", "a 100,000-character run id (echoed whole before)",
         Cli(("rollout", "preflight", "--spec", "{spec}"), spec={"run_id": "x" * 100_000},
             shown='{"run_id": "xxx…" (100,000 characters)}'),
         "run_id: '" + "x" * 47 + "..." + "x" * 48 + "' must be 1-100 letters"),  # 100 characters of it
    Case("cli-judge-config-dev-zero", "CLI", "/dev/zero as the judge config",
         Cli(("analyze", "--observations", "kafka://127.0.0.1:9", "--config", "/dev/zero", "--out", "{tmp}")),
         "cannot read judge config /dev/zero: is a device, pipe or socket, not a regular file"),
    Case("cli-observations-dev-zero", "CLI", "/dev/zero as the observations file (inline engine)",
         Cli(("analyze", "--observations", "/dev/zero", "--engine", "inline", "--out", "{tmp}")),
         "--observations /dev/zero is a device, pipe or socket, which would be read forever"),
    Case("cli-release-cluster-path", "CLI", "release --cluster a path (the connection id lands in Airflow's URL)",
         Cli(("release", "--cluster", "../../variables", "--version", "4.1.2"), env={"AIRFLOW_API_TOKEN": "t"}),
         "cluster_conn_id: '../../variables' is not an Airflow connection id: up to 250 letters, digits, '_', '-' "
         "or '.' (not starting with '.'), not a path"),

    # ----- the Airflow connection's extras -----
    Case("conn-extras-bad-json", "connection extras", "extras not JSON", {"extra": "{dir: /srv/kafka"},
         "the extras are not valid JSON"),
    Case("conn-extras-list", "connection extras", "extras a JSON list", {"extra": '["/srv/kafka"]'},
         "the extras must be a JSON object with deployer, dir, client"),
    Case("conn-unknown-extra", "connection extras", "unknown extra", {"extra": {"dir": "/c", "bootstrap": "x:9092"}},
         "extras.bootstrap: unknown field; known fields are bootstrap_servers, client, command, deployer, dir, docker"),
    Case("conn-deployer-unknown", "connection extras", "unknown deployer", {"extra": {"dir": "/c", "deployer": "k8s"}},
         "extras.deployer: Input should be 'local', 'docker' or 'command' (got 'k8s')"),
    Case("conn-command-missing", "connection extras", "command deployer without its commands",
         {"extra": {"deployer": "command", "bootstrap_servers": "k1:9092"}},
         "extras.command: is required with deployer command"),
    Case("conn-dir-number", "connection extras", "dir not a string", {"extra": {"dir": 42}},
         "extras.dir: Input should be a valid string (got 42)"),
    Case("conn-dir-missing", "connection extras", "dir missing", {"extra": {"deployer": "local"}},
         "extras.dir: is required: the local cluster's directory"),
    Case("conn-client-not-mapping", "connection extras", "client settings as a string",
         {"extra": {"dir": "/c", "client": "security.protocol=SSL"}},
         "extras.client: must be a mapping of librdkafka settings"),
    Case("conn-client-nested", "connection extras", "client setting nested",
         {"extra": {"dir": "/c", "client": {"sasl": {"mechanism": "PLAIN"}}}},
         "extras.client: settings ['sasl'] must be single values"),

    # ----- observations -----
    Case("obs-not-json", "observations", "a record that is not JSON", Obs(add=("{not json",) * 3), "malformed",
         excluded=3),
    Case("obs-not-object", "observations", "a JSON array instead of an object", Obs(add=("[1, 2, 3]",)), "malformed",
         excluded=1),
    Case("obs-missing-fields", "observations", "a record without most fields", Obs(add=('{"lane": "canary"}',)),
         "malformed", excluded=1),
    Case("obs-wrong-type", "observations", "send time as text", Obs(add=({"send_ts": "yesterday"},) * 2),
         "malformed", excluded=2),
    Case("obs-unknown-lane", "observations", "unknown lane", Obs(add=({"lane": "purple"},) * 2), "unknown_lane",
         excluded=2),
    Case("obs-unknown-outcome", "observations", "unknown outcome", Obs(add=({"outcome": "vanished"},)),
         "unknown_outcome", excluded=1),
    Case("obs-schema-version", "observations", "a newer schema version", Obs(add=({"schema": 9},)), "schema_version",
         excluded=1),
    Case("obs-clock-skew", "observations", "received before it was sent",
         Obs(add=({"receive_ts": "send-500"},) * 4), "clock_skew", excluded=4),
    Case("obs-future", "observations", "sent a day in the future",
         Obs(add=({"send_ts": "now+1d", "ack_ts": "send+2", "receive_ts": "send+5"},) * 2), "future_timestamp",
         excluded=2),
    Case("obs-oversize", "observations", "a 200 kB record", Obs(add=({"error": "x" * 200_000},)), "oversize",
         excluded=1),
    Case("obs-empty-canary-lane", "observations", "no canary observations at all", Obs(lanes=("baseline",)),
         "no observations after the warm-up in lane(s) canary"),
    Case("obs-no-observations", "observations", "no observations at all", Obs(lanes=()),
         "no valid observations in the window"),
    Case("obs-canary-lane-all-bad", "observations", "every canary record received before it was sent",
         Obs(edit=("canary", {"receive_ts": "send-500"})), "no observations after the warm-up in lane(s) canary"),
    # issue 35, item 1: a canary lane 100x slower whose clock runs 20 minutes behind was promoted with score 100
    Case("obs-lanes-apart", "observations", "a canary lane 100× slower whose clock runs 20 minutes behind the "
         "baseline's", Obs(edit=("canary", {"send_ts": "send-1200000", "ack_ts": "send+3", "receive_ts": "send+500"})),
         "observed at the same time in only 0 of"),
)

ENTRY_ORDER = ("trigger form", "rollout spec", "CLI", "connection extras", "observations")


def _cell(text: str, limit: int = 110) -> str:
    text = str(text).replace("\n", "\\n")
    if len(text) > limit:
        text = text[:limit - 1] + "…"
    return text.replace("|", "\\|")


def example(case: Case) -> str:
    if isinstance(case.input, dict):
        if case.entry == "connection extras":
            extra = case.input["extra"]
            return "extra: " + (extra if isinstance(extra, str) else json.dumps(extra))
        return json.dumps(case.input)
    if isinstance(case.input, Obs) and any(isinstance(r, dict) and "error" in r for r in case.input.add):
        return '{"error": "xxx…" (200,000 characters)} on a good record'
    return str(case.input)


def render() -> str:
    counts = {entry: sum(c.entry == entry for c in CASES) for entry in ENTRY_ORDER}
    lines = [
        "# Bad inputs",
        "",
        "What kafka-canary does with bad input, case by case. Generated from the cases in "
        "`tests/reliability/bad_inputs.py`, which `tests/reliability/test_bad_inputs.py` runs (the cases that reach "
        "a cluster run against a real local cluster and check afterwards that nothing on it changed: nodes, pids, "
        "versions, configs, racks, topics, no rollout lock). Regenerate with "
        "`.venv/bin/python tests/reliability/bad_inputs.py --write`; the test fails when this page is stale.",
        "",
        f"{len(CASES)} cases: " + ", ".join(f"{n} {entry}" for entry, n in counts.items()) + ".",
        "",
        "- **trigger form**: the DAG `kafka_broker_canary`'s params, validated as Airflow's API server validates a "
        "run's conf before the run exists; what only the rollout's rules or the cluster can judge passes the form "
        "and is refused by the run's first task, `preflight`, before anything is changed.",
        "- **rollout spec**: `load_spec` names every bad field at once without a cluster; checks that need the "
        "cluster run in the `preflight` step before the rollout lock is taken.",
        "- **CLI**: `kafka-canary …` exits 2 and prints one line on stderr; 4 when the error stopped a run it had "
        "opened (a step failed or was refused: the run is unfinished, see the exit codes in design.md).",
        "- **connection extras**: the Airflow connection (type `kafka_canary`) every rollout task reads.",
        "- **observations**: bad records never crash the analysis and never pass in silence: each is excluded, "
        "counted per reason in the verdict's `data_quality.excluded` and named in the verdict's reason (which the "
        "CLI prints and the reports show), in the inline judge (interim looks, `engine: inline`) and in the Spark "
        "job alike. A time beyond 5 minutes after the analysing machine's clock is `future_timestamp`; a record "
        "over 64 KiB is `oversize` and is not parsed.",
        "",
        "| # | entry point | bad input | example | outcome |",
        "|---|---|---|---|---|",
    ]
    for n, case in enumerate(sorted(CASES, key=lambda c: ENTRY_ORDER.index(c.entry)), 1):
        cluster = " (real cluster)" if case.cluster else ""
        lines.append(f"| {n} | {case.entry}{cluster} | {_cell(case.what)} | `{_cell(example(case), 160)}` | "
                     f"{_cell(case.outcome(), 400)} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:
        DOC.parent.mkdir(parents=True, exist_ok=True)
        DOC.write_text(render())
        print(f"wrote {DOC} ({len(CASES)} cases)")
    else:
        sys.stdout.write(render())
