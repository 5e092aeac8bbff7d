"""The service deployer: runs a service's producer and consumer instances as local processes, each on a version, in
a lane. The client rollout steps only use `start`, `stop` and `instances`, so a Kubernetes deployer (a Deployment per
lane and version) can take its place.

    fleet = ServiceDeployer("/tmp/orders-fleet", bootstrap, topic="orders", group="orders-billing")
    fleet.start(Instance("orders-consumer-0", "consumer", "baseline", "v1", 0, 2))   # idempotent
    fleet.stop("orders-consumer-0")                                                  # SIGTERM, then SIGKILL

An instance runs the service's own command for its role when one is given (`commands`: an argument list per role,
any language, `{placeholders}` from CONTRACT filled in, in `cwd` with `env` added), else `python -m <module> …` with
this interpreter: by default `canary.examples.services.<role>`, the sample services shipped with the library (a
module of your own is imported from `cwd`). Either way it receives the contract in its environment (CONTRACT: its
instance id to use as client.id, and group.instance.id for consumers — canary instances carry the client marker,
canary.lanes.canary_client_id —, its lane, version, ordinal among its lane's consumers, the bootstrap servers, a
JSON file of client settings, `KAFKA_CANARY_RUN_ID` so its observations carry the fleet's run id). The pid, start
time and version of each instance are kept in `instances.json`; a process is only signalled when it is provably the
one started (same pid and start time, the instance marker on its command line or, for a command of the team's own,
in its environment: canary.process), so a retried step finds a running instance on the right version and leaves it
alone. Stopping is SIGTERM to the instance's process group (the service closes its LaneConsumer, committing, or
flushes its LaneProducer; a wrapper script and the JVM it started stop together), then SIGKILL after
`stop_timeout`.

Files in the directory: `instances.json`, `<instance>.log` (the process's output), `<instance>.records.jsonl`
(what the instance acknowledged or processed, for tests and audits), `<instance>.rebalances.jsonl` (a subscribed
consumer's rebalance callbacks, canary.clients.member), `client.json` (connection settings, 0600).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import string
import sys
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from canary import process
from canary.clients.observe import RUN_ID_ENV
from canary.errors import CanaryError
from canary.observations import Lane

STATE_FILE = "instances.json"
ROLES = ("producer", "consumer")
DEFAULT_MODULE = "canary.examples.services.{role}"
# What every instance receives: placeholder of a service command -> the environment variable that holds it.
CONTRACT = {
    "id": "KAFKA_CANARY_INSTANCE_ID",          # client.id, and group.instance.id of a consumer
    "role": "KAFKA_CANARY_ROLE",               # producer or consumer
    "lane": "KAFKA_CANARY_LANE",               # canary or baseline
    "version": "KAFKA_CANARY_VERSION",         # the version this instance runs
    "instance": "KAFKA_CANARY_INSTANCE",       # consumers: ordinal among the lane's consumers, from 0
    "instances": "KAFKA_CANARY_INSTANCES",     # consumers: how many the lane has
    "bootstrap": "KAFKA_CANARY_BOOTSTRAP",     # bootstrap.servers
    "topic": "KAFKA_CANARY_TOPIC",
    "group": "KAFKA_CANARY_GROUP",             # consumers' group.id
    "rate": "KAFKA_CANARY_RATE",               # producers: records per second
    "client_config": "KAFKA_CANARY_CONNECTION_FILE",  # a JSON file (0600) of librdkafka connection/security settings
    "records": "KAFKA_CANARY_RECORDS",         # where the instance may log what it acknowledged or processed
    "run_id": RUN_ID_ENV,                      # the run id its observations carry
    # consumers of the KIP-848 migration canary (docs/migration-canary.md); empty for the client rollout's
    "group_protocol": "KAFKA_CANARY_GROUP_PROTOCOL",  # group.protocol: classic or consumer
    "assignor": "KAFKA_CANARY_GROUP_ASSIGNOR",  # classic: partition.assignment.strategy, consumer: remote assignor
    "rebalances": "KAFKA_CANARY_REBALANCES",   # where a subscribed consumer logs its rebalance callbacks (GroupMember)
}


def check_command(role: str, argv: list[str]) -> None:
    """Raises ValueError, saying what to write, when a service command is empty or names a placeholder that is not
    in CONTRACT (or is not a template at all)."""
    if not argv:
        raise ValueError(f"the {role} command is empty; give the program and its arguments as a list")
    for part in argv:
        try:
            names = {name for _, name, _, _ in string.Formatter().parse(part) if name is not None}
        except ValueError as exc:
            raise ValueError(f"the {role} command's argument {part!r} is not a template ({exc}); write a literal "
                             f"brace as {{{{ or }}}}") from None
        unknown = sorted(names - set(CONTRACT))
        if unknown:
            raise ValueError(f"the {role} command names {', '.join('{' + n + '}' for n in unknown)}; an instance's "
                             f"placeholders are {', '.join('{' + n + '}' for n in CONTRACT)}")


class DeployError(CanaryError):
    """An instance could not be started or stopped; the message names it and its log."""


@dataclass(frozen=True)
class Instance:
    """One service instance as wanted: its id (client.id / group.instance.id), role, lane, version, and for
    consumers its share of the lane (ordinal and count)."""
    name: str
    role: str
    lane: Lane
    version: str
    instance: int = 0
    instances: int = 1
    group_protocol: str = ""    # a subscribed consumer's group.protocol (the migration canary); "" for lane clients
    assignor: str = ""          # its assignor for that protocol; "" for the client's default


@dataclass(frozen=True)
class InstanceStatus:
    instance: Instance
    running: bool
    pid: int | None

    def to_dict(self) -> dict:
        return asdict(self.instance) | {"running": self.running, "pid": self.pid}


class ServiceDeployer:
    """Local service instances under `directory`. rate: records/s per producer; refresh_interval: the lane view's;
    tie_to_parent: the instances die with this process (tests)."""

    def __init__(self, directory: str | Path, bootstrap_servers: str, *, topic: str, group: str,
                 client: dict[str, str] | None = None, rate: float = 20.0, run_id: str = "service",
                 refresh_interval: float = 2.0, module: str = DEFAULT_MODULE, stop_timeout: float = 20.0,
                 tie_to_parent: bool = False, cwd: str | Path | None = None,
                 commands: dict[str, list[str]] | None = None, env: dict[str, str] | None = None):
        self.directory = Path(directory).resolve()
        self.directory.mkdir(parents=True, exist_ok=True)
        self.bootstrap_servers = bootstrap_servers
        self.topic, self.group, self.rate, self.run_id = topic, group, rate, run_id
        self.refresh_interval, self.module, self.stop_timeout = refresh_interval, module, stop_timeout
        self.tie_to_parent = tie_to_parent
        self.cwd = Path(cwd).resolve() if cwd else None
        self.commands, self.env = dict(commands or {}), dict(env or {})
        self.client_file = self.directory / "client.json"
        settings = json.dumps(dict(client or {}), sort_keys=True)
        if not self.client_file.exists() or self.client_file.read_text() != settings:
            fd = os.open(self.client_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(settings)

    # ----- state -----

    def _state(self) -> dict[str, dict]:
        path = self.directory / STATE_FILE
        return json.loads(path.read_text()) if path.exists() else {}

    def _save(self, state: dict[str, dict]) -> None:
        path = self.directory / STATE_FILE
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=2, sort_keys=True))
        os.replace(tmp, path)

    def marker(self, name: str) -> str:
        return process.marker(self.directory, name)  # type: ignore[arg-type]  # an instance id, not a node id

    def _running(self, record: dict) -> bool:
        return process.is_ours(record.get("pid"), record.get("started"), self.marker(record["name"]))

    def instances(self) -> list[InstanceStatus]:
        """Every instance this deployer knows, running or not, sorted by name."""
        result = []
        for _, rec in sorted(self._state().items()):
            wanted = Instance(**{f.name: rec[f.name] for f in fields(Instance) if f.name in rec})
            running = self._running(rec)
            result.append(InstanceStatus(wanted, running, rec["pid"] if running else None))
        return result

    def status(self, name: str) -> InstanceStatus | None:
        return next((s for s in self.instances() if s.instance.name == name), None)

    def records_file(self, name: str) -> Path:
        return self.directory / f"{name}.records.jsonl"

    def rebalances_file(self, name: str) -> Path:
        return self.directory / f"{name}.rebalances.jsonl"

    # ----- actions -----

    def start(self, wanted: Instance) -> bool:
        """Converges one instance to `wanted`: left alone when it already runs exactly so (False); else stopped if
        running, then started (True). Raises DeployError when the process exits at once (its log says why)."""
        if wanted.role not in ROLES:
            raise DeployError(f"instance {wanted.name}: role {wanted.role!r} must be one of {ROLES}")
        current = self.status(wanted.name)
        if current is not None and current.running and current.instance == wanted:
            return False
        if current is not None and current.running:
            self.stop(wanted.name)
        problem = self.program_problem(wanted)
        if problem:
            raise DeployError(f"instance {wanted.name} cannot start: {problem}")
        log_file = self.directory / f"{wanted.name}.log"
        values = self.contract(wanted)
        env = dict(os.environ) | self.env | {CONTRACT[k]: v for k, v in values.items()} | {"PYTHONUNBUFFERED": "1"}
        template = self.commands.get(wanted.role)
        if template:  # the team's own service: the marker in its environment, its arguments its own
            cmd = [part.format_map(values) for part in template]
            env[process.MARKER_ENV] = self.marker(wanted.name)
        else:
            cmd = self._sample_command(wanted)
            env.pop(process.MARKER_ENV, None)  # its marker is on its command line; none inherited from elsewhere
        if self.cwd is not None and not template:
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(self.cwd), os.environ.get("PYTHONPATH")]))
        try:
            pid, started = process.start(cmd, self.cwd or self.directory, log_file, tie_to_parent=self.tie_to_parent,
                                         env=env)
        except RuntimeError as exc:
            raise DeployError(f"instance {wanted.name} did not start: {exc}") from exc
        state = self._state()
        state[wanted.name] = asdict(wanted) | {"pid": pid, "started": started, "started_ms": int(time.time() * 1000)}
        self._save(state)
        # An instance that cannot connect or refuses its arguments exits within a moment.
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:
            if not process.is_ours(pid, started, self.marker(wanted.name)):
                raise DeployError(f"instance {wanted.name} ({wanted.role} {wanted.version}) exited at once; see "
                                  f"{log_file}: {log_tail(log_file)}")
            time.sleep(0.1)
        return True

    def contract(self, wanted: Instance) -> dict[str, str]:
        """What `wanted` receives (CONTRACT's placeholders and their values)."""
        return {"id": wanted.name, "role": wanted.role, "lane": wanted.lane, "version": wanted.version,
                "instance": str(wanted.instance), "instances": str(wanted.instances),
                "bootstrap": self.bootstrap_servers, "topic": self.topic, "group": self.group, "rate": f"{self.rate:g}",
                "client_config": str(self.client_file), "records": str(self.records_file(wanted.name)),
                "run_id": self.run_id, "group_protocol": wanted.group_protocol, "assignor": wanted.assignor,
                "rebalances": str(self.rebalances_file(wanted.name))}

    def program_problem(self, wanted: Instance) -> str | None:
        """Why `wanted` cannot start: the service's directory missing, or its own command's program not found or not
        executable; None when it can."""
        cwd = self.cwd or self.directory
        if not cwd.is_dir():
            return f"the service's directory {cwd} does not exist"
        template = self.commands.get(wanted.role)
        if not template:
            return None
        program = template[0].format_map(self.contract(wanted))
        if "/" in program:
            path = cwd / program  # an absolute program stays as it is
            found = path.is_file() and os.access(path, os.X_OK)
        else:
            found = shutil.which(program, path=self.env.get("PATH", os.environ.get("PATH"))) is not None
        return None if found else (f"the {wanted.role} command of {wanted.version} runs {program!r}, which is not an "
                                   f"executable file (looked up {'in ' + str(cwd) if '/' in program else 'on PATH'})")

    def _sample_command(self, wanted: Instance) -> list[str]:
        """`python -m <module>` with the sample services' options."""
        cmd = [sys.executable, "-m", self.module.format(role=wanted.role), "--bootstrap", self.bootstrap_servers,
               "--topic", self.topic, "--id", wanted.name, "--lane", wanted.lane, "--version", wanted.version,
               "--client-config", str(self.client_file), "--records", str(self.records_file(wanted.name)),
               "--refresh-interval", str(self.refresh_interval)]
        if wanted.role == "producer":
            cmd += ["--rate", f"{self.rate:g}"]
        else:
            cmd += ["--group", self.group, "--instance", str(wanted.instance), "--instances", str(wanted.instances)]
        return cmd + ["--", self.marker(wanted.name)]  # ignored by the service; proves the process is ours

    def stop(self, name: str) -> bool:
        """SIGTERM, SIGKILL after stop_timeout; False when it was not running. The instance stays known."""
        state = self._state()
        record = state.get(name)
        if record is None or not self._running(record):
            return False
        process.stop(record["pid"], record["started"], self.marker(name), timeout=self.stop_timeout, group=True)
        if self._running(record):
            raise DeployError(f"instance {name} (pid {record['pid']}) did not stop")
        return True

    def forget(self, name: str) -> None:
        """Stops an instance and removes it from the state (a canary instance after the rollout)."""
        self.stop(name)
        state = self._state()
        if state.pop(name, None) is not None:
            self._save(state)

    def stop_all(self) -> list[str]:
        """Stops every instance, then SIGKILLs any process still carrying this directory's marker."""
        stopped = []
        for status in self.instances():
            with contextlib.suppress(DeployError):
                if self.stop(status.instance.name):
                    stopped.append(status.instance.name)
        process.kill_marked(f"{self.directory}#")
        return stopped


def log_tail(path: Path, lines: int = 5) -> str:
    """The last `lines` of an instance's log on one line, for an error message."""
    try:
        return " | ".join(path.read_text(errors="replace").strip().splitlines()[-lines:])
    except OSError:
        return "(no log)"
