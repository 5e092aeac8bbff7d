"""The command deployer: a fleet run by systemd, SSH, Ansible or any tooling of a platform team's own, driven through
shell command templates from the spec's `cluster.command` section.

    roll:     ssh {host} sudo /usr/local/bin/kafka-roll {version} < {config_file}
    describe: ssh {host} cat /opt/kafka/DEPLOYED_VERSION

Placeholders, each filled in quoted for the shell: `{node_id}` (also `{broker_id}`), `{role}` (broker, controller),
`{host}`, `{version}`; roll only: `{config_file}` (a properties file with every override the broker is to run with,
broker.rack included, and nothing else) and `{config_json}` (the same as one JSON object, every string character a
shell could act on written as a \\u escape, so no value runs anything however the template quotes it, through ssh
too). A roll is a graceful stop,
the config and version put in place, and a start; the command returns once the broker's process runs (registration
and ISR are the rollout's to wait for) and exits non-zero when it cannot. `describe` prints the version the node
runs, alone or followed by its state (`3.9.2 running`, `3.9.2 stopped`), or a JSON object
`{"version": …, "running": …}`. Optional `stop` and `start` stop one broker gracefully and start it as it was
(`kafka-canary rollout stop-broker/start-broker`).

What the cluster can tell comes from the cluster (each broker's config by DescribeConfigs, its rack and liveness by
its registration), so a rollout of a fleet we did not start begins from the truth; the version is the one thing only
the deployer knows. Every command is audited with its exit status and output, secrets cut."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path

from canary.broker_metrics import BrokerMetricsSource
from canary.errors import ClusterError
from canary.kafka.broker_config import properties_line
from canary.kafka.secrets import is_secret
from canary.rollout.deployers import commands
from canary.rollout.deployers.base import (
    BrokerInfo,
    Capability,
    CommandSettings,
    ControllerInfo,
    cluster_facts,
    user_config,
)

RUNNING = {"running", "active", "up", "true", "started"}
STOPPED = {"stopped", "inactive", "down", "false", "exited", "failed", "dead", "created"}


class CommandDeployer:
    def __init__(self, settings: CommandSettings, bootstrap_servers: str, client_config: dict[str, str] | None = None):
        self.settings = settings
        self._bootstrap = bootstrap_servers
        self.client_config = client_config or {}
        self.secrets = tuple(v for k, v in self.client_config.items() if is_secret(k) and v)
        self._record: Callable[[str, dict], object] | None = None

    @property
    def capabilities(self) -> frozenset[Capability]:
        can: set[Capability] = {"concurrent_rolls"}  # each roll its own command, on its own host
        if self.settings.roll_controller:
            can.add("controllers")
        if self.settings.stop and self.settings.start:
            can.add("stop_start")
        return frozenset(can)

    @property
    def bootstrap_servers(self) -> str:
        return self._bootstrap

    def report_to(self, record: Callable[[str, dict], object]) -> None:
        self._record = record

    def _run(self, action: str, template: str, values: dict[str, object], timeout: float,
             secrets: tuple[str, ...] = ()) -> str:
        try:
            result = commands.run(action, template, values, timeout, self.secrets + secrets)
        except commands.CommandFailed as exc:
            if self._record:
                self._record("deployer command failed", {"name": action, "error": str(exc), "output": exc.output})
            raise
        if self._record and action != "describe":  # describes are many and change nothing
            self._record("deployer command", result.to_dict())
        return result.output

    def _describe(self, role: str, node_id: int, host: str) -> tuple[str, bool | None]:
        """(version, running or None when the command did not say)."""
        out = self._run("describe", self.settings.describe, _node(role, node_id, host), self.settings.describe_timeout)
        return parse_description(out, f"the describe command of {role} {node_id}")

    def brokers(self) -> list[BrokerInfo]:
        facts = cluster_facts(self.bootstrap_servers, self.client_config)  # {}: every broker counts as down
        found = []
        for node_id, host in sorted(self.settings.brokers.items()):
            version, running = self._describe("broker", node_id, host)
            rack, config = facts.get(node_id, (None, {}))
            found.append(BrokerInfo(node_id, version, user_config(config), rack or None,
                                    node_id in facts if running is None else running and node_id in facts))
        return found

    def process_running(self, broker_id: int) -> bool | None:
        return self._describe("broker", broker_id, self._host("broker", broker_id, self.settings.brokers))[1]

    def exit_cause(self, broker_id: int) -> str | None:
        return None  # its roll command prints the broker's log when the broker does not start

    def controllers(self) -> list[ControllerInfo]:
        found = []
        for node_id, host in sorted(self.settings.controllers.items()):
            version, running = self._describe("controller", node_id, host)
            found.append(ControllerInfo(node_id, version, running is not False))
        return found

    def prepare(self, version: str) -> None:
        if not self.settings.prepare:
            return
        for node_id, host in sorted({**self.settings.controllers, **self.settings.brokers}.items()):
            role = "broker" if node_id in self.settings.brokers else "controller"
            self._run("prepare", self.settings.prepare, _node(role, node_id, host, version=version),
                      self.settings.timeout)

    def roll_broker(self, broker_id: int, *, version: str, config: dict[str, str], rack: str | None,
                    client_delay_ms: float) -> None:
        if client_delay_ms:
            raise ClusterError("the command deployer injects no client delay (fault.client_delay_ms is for the local "
                               "cluster's tests)")
        host = self._host("broker", broker_id, self.settings.brokers)
        wanted = dict(sorted(config.items())) | ({"broker.rack": rack} if rack else {})
        with tempfile.TemporaryDirectory(prefix="kafka-canary-roll-") as tmp:
            config_file = Path(tmp) / f"broker-{broker_id}.properties"
            config_file.write_text("".join(properties_line(k, v) for k, v in wanted.items()))
            values = _node("broker", broker_id, host, version=version, config_file=config_file,
                           config_json=commands.inert_json(wanted))
            self._run("roll", self.settings.roll, values, self.settings.timeout,
                      tuple(v for k, v in wanted.items() if is_secret(k) and v))

    def roll_controller(self, node_id: int, *, version: str) -> None:
        if not self.settings.roll_controller:
            raise ClusterError("cluster.command has no roll_controller command: the controllers are not this "
                               "deployer's to roll")
        host = self._host("controller", node_id, self.settings.controllers)
        self._run("roll_controller", self.settings.roll_controller,
                  _node("controller", node_id, host, version=version), self.settings.timeout)

    def stop_broker(self, broker_id: int) -> None:
        self._node_command("stop", self.settings.stop, broker_id)

    def start_broker(self, broker_id: int) -> None:
        self._node_command("start", self.settings.start, broker_id)

    def _node_command(self, action: str, template: str | None, broker_id: int) -> None:
        if not template:
            raise ClusterError(f"cluster.command has no {action} command: add stop and start to stop and start a "
                               f"broker through this deployer")
        host = self._host("broker", broker_id, self.settings.brokers)
        self._run(action, template, _node("broker", broker_id, host), self.settings.timeout)

    def broker_metrics(self) -> BrokerMetricsSource | None:
        return None  # the fleet's own Prometheus (broker_metrics.prometheus in the spec) is where they are

    @staticmethod
    def _host(role: str, node_id: int, hosts: Mapping[int, str]) -> str:
        if node_id not in hosts:
            raise ClusterError(f"cluster.command lists no {role} {node_id}; its {role}s are {sorted(hosts)}")
        return hosts[node_id]


def _node(role: str, node_id: int, host: str, **more: object) -> dict[str, object]:
    """The placeholders' values for one node's command."""
    return {"node_id": node_id, "broker_id": node_id, "role": role, "host": host, **more}


def parse_description(output: str, what: str) -> tuple[str, bool | None]:
    """A describe command's output → (version, running or None). Takes a JSON object with `version` (and `running`),
    or a line `VERSION [STATE]`; raises ClusterError saying what was expected."""
    text = output.strip()
    expected = (f"{what} printed {text[:200]!r}; it must print the node's Kafka version, alone or followed by "
                f"running/stopped (e.g. '3.9.2 running'), or a JSON object "
                f"{{\"version\": \"3.9.2\", \"running\": true}}")
    if text.startswith("{"):
        try:
            data = json.loads(text)
        except ValueError:
            raise ClusterError(expected) from None
        version, running = data.get("version"), data.get("running")
        if not isinstance(version, str) or not _is_version(version) or not isinstance(running, bool | None):
            raise ClusterError(expected)
        return version, running
    words = text.splitlines()[-1].split() if text else []
    if not 1 <= len(words) <= 2 or not _is_version(words[0]):
        raise ClusterError(expected)
    if len(words) == 1:
        return words[0], None
    state = words[1].lower()
    if state not in RUNNING | STOPPED:
        raise ClusterError(expected)
    return words[0], state in RUNNING


def _is_version(text: str) -> bool:
    parts = text.split(".")
    return len(parts) == 3 and all(p.isdigit() for p in parts)
