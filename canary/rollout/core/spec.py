"""What every rollout kind's spec shares: the spec error, sections where a null means the default, the cluster section
(which deployer reaches the brokers, and how), the judge section, the run identity (run id, the form run.json keeps,
the secret values) and loading a model from a file or a mapping.

Each kind's spec is one pydantic model (canary.rollout.broker.spec, canary.rollout.client.spec,
canary.rollout.migration.spec), built and checked in one place; the steps read it as it is. Secrets
(sasl.password, ssl.key.password, …) belong in the client settings like any librdkafka setting, but need not be
written into the file: `with_environment` adds the KAFKA_CANARY_CLIENT_<KEY> variables (the CLI passes its
environment). Secret values never leave the process: `to_dict()` (run.json, the report) shows them masked.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal, TypeVar, get_args

import yaml
from pydantic import BaseModel, Field, ValidationError, ValidationInfo, field_validator, model_validator

from canary.errors import CanaryError, one_line
from canary.fields import ClientSettings, Duration, Matching, Name, SpecModel, problems
from canary.files import read_spec_file, shown_path
from canary.kafka.secrets import is_secret, redacted, refuse_credentials
from canary.rollout.deployers.base import CommandSettings, Deployer, DockerSettings
from canary.rollout.deployers.commands import placeholders, quoted_placeholders

if TYPE_CHECKING:
    from canary.judge import JudgeConfig

DeployerName = Literal["local", "docker", "command"]
Engine = Literal["spark", "inline"]
DEPLOYERS: tuple[str, ...] = get_args(DeployerName)
ENGINES: tuple[str, ...] = get_args(Engine)
DAY = 24 * 3600


class SpecError(CanaryError):
    """A spec that cannot be used; `problems` lists every field to fix."""

    WHAT = "the rollout spec"

    def __init__(self, problems: list[str]):
        self.problems = problems
        # One problem is one line (the CLI's error line); several are listed one per line.
        listed = " " + problems[0] if len(problems) == 1 else "\n  - " + "\n  - ".join(problems)
        super().__init__(f"{self.WHAT} is not valid, nothing was changed:" + listed)


class SpecSection(SpecModel):
    """A section of a spec file: a null value (`probe:` with nothing under it) means the field's default."""

    @model_validator(mode="before")
    @classmethod
    def _null_is_default(cls, data: Any) -> Any:
        return {k: v for k, v in data.items() if v is not None} if isinstance(data, dict) else data


def section() -> Any:
    """The default of a section field: a section left out is validated from {} (its defaults, or the problem of a
    field it requires)."""
    return Field(default_factory=dict)


def interim_within(window: float, interim: float) -> None:
    """An interim look comes within the window it looks into."""
    if interim > window:
        raise ValueError(f"interim_interval {interim:g}s is longer than the window {window:g}s; shorten it or "
                         f"lengthen the window")


class DockerSection(SpecSection):
    """The docker deployer's cluster: containers labelled io.kafka-canary.cluster=<name> on a Docker engine."""

    name: Name
    image: str | None = None            # version -> image, e.g. apache/kafka:{version} (None: $KAFKA_CANARY_IMAGE)
    host: str | None = None             # the engine, as DOCKER_HOST says it (None: $DOCKER_HOST or the local socket)
    stop_timeout: Annotated[float, Duration(1, 3600)] = 120.0   # controlled shutdown before SIGKILL
    start_timeout: Annotated[float, Duration(5, 3600)] = 120.0  # until a new container serves its listener

    @field_validator("image")
    @classmethod
    def _template(cls, value: str | None) -> str | None:
        if value is not None and "{version}" not in value:
            raise ValueError("must contain {version}, e.g. apache/kafka:{version}")
        unknown = sorted(placeholders(value) - {"version"}) if value is not None else []
        if unknown:
            raise ValueError(f"uses {', '.join('{' + u + '}' for u in unknown)}; an image template may use only "
                             f"{{version}}, e.g. apache/kafka:{{version}}")
        return value

    @field_validator("host")
    @classmethod
    def _no_password(cls, value: str | None) -> str | None:
        if value is not None:  # an ssh://user@host login name is no secret: SSH keys authenticate
            refuse_credentials(value, "a tcp:// engine authenticates with TLS certificates (DOCKER_CERT_PATH, "
                                      "DOCKER_TLS_VERIFY), an ssh://user@host engine with SSH keys")
        return value

    def settings(self) -> DockerSettings:
        return DockerSettings(self.name, self.image, self.host, self.stop_timeout, self.start_timeout)


# The placeholders each command of the command deployer may use (canary.rollout.deployers.command).
_NODE = {"node_id", "broker_id", "role", "host"}
COMMAND_PLACEHOLDERS = {"roll": _NODE | {"version", "config_file", "config_json"}, "describe": _NODE,
                        "prepare": _NODE | {"version"}, "roll_controller": _NODE | {"version"}, "stop": _NODE,
                        "start": _NODE}
# Only what host names, addresses and ssh's user@host need: nothing a shell acts on, and no leading `-` that ssh or
# another command would take for an option (-oProxyCommand=...).
Host = Annotated[str, Matching(r"^(?!-)[A-Za-z0-9._:@\[\]%-]{1,253}$",
                               "a host name or address, as your commands take it: letters, digits and . _ - : @ [ ] %, "
                               "not starting with -")]


class CommandSection(SpecSection):
    """The command deployer's fleet: node ids and hosts, and the shell command templates that act on one node."""

    brokers: dict[int, Host] = Field(min_length=1)       # broker id -> host ({host} in its commands)
    roll: str                                          # stop, put {version} and {config_file} in place, start
    describe: str                                      # print the node's version [running|stopped], or JSON
    controllers: dict[int, Host] = Field(default_factory=dict)
    roll_controller: str | None = None                 # restart one controller on {version}
    prepare: str | None = None                         # make {version} ready on {host} before any change
    stop: str | None = None                            # stop one broker gracefully (stop-broker; with start)
    start: str | None = None                           # start it again as it was (start-broker)
    timeout: Annotated[float, Duration(1, DAY)] = 600.0            # per roll, prepare, controller roll
    describe_timeout: Annotated[float, Duration(1, 3600)] = 30.0   # per describe

    @field_validator("roll", "describe", "roll_controller", "prepare", "stop", "start")
    @classmethod
    def _placeholders(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is None:
            return value
        if not value.strip():
            raise ValueError("is empty; write the shell command")
        name = str(info.field_name)
        used = placeholders(value)
        unknown = sorted(used - COMMAND_PLACEHOLDERS[name])
        if unknown:
            raise ValueError(f"uses {', '.join('{' + u + '}' for u in unknown)}; a {name} command may use "
                             f"{', '.join('{' + k + '}' for k in sorted(COMMAND_PLACEHOLDERS[name]))}")
        quoted = quoted_placeholders(value)
        if quoted:
            raise ValueError(f"writes {', '.join('{' + q + '}' for q in quoted)} inside quotes; write placeholders "
                             f"bare: each value is quoted for the shell already, and quotes around it undo that")
        if name == "roll" and not ({"config_file", "config_json"} & used and "version" in used):
            raise ValueError("must use {version} and {config_file} or {config_json}: a roll puts the broker on "
                             "exactly that version and config")
        if name == "roll_controller" and "version" not in used:
            raise ValueError("must use {version}")
        return value

    @model_validator(mode="after")
    def _controllers_have_a_command(self) -> CommandSection:
        if self.controllers and not self.roll_controller:
            raise ValueError("controllers are listed but no roll_controller command rolls them; add one, or leave the "
                             "controllers out (an upgrade then leaves them as they are)")
        if (self.stop is None) != (self.start is None):
            raise ValueError("give stop and start together: a broker this deployer stops it must also start")
        both = sorted(set(self.controllers) & set(self.brokers))
        if both:
            raise ValueError(f"node ids {both} are listed as brokers and as controllers; a combined node is not "
                             f"supported")
        return self

    def settings(self) -> CommandSettings:
        return CommandSettings(**self.model_dump())


_SECTION_EXAMPLE = {"docker": "{name: <the io.kafka-canary.cluster label>}",
                    "command": "{brokers: {1: host-1, …}, roll: …, describe: …}"}


class ClusterSection(SpecSection):
    """The cluster a rollout acts on; also a kafka_canary Airflow connection's extras (its password is added to the
    client settings as sasl.password)."""

    deployer: DeployerName = "local"
    dir: str = ""                        # local: the cluster's directory (as given to `kafka-canary cluster up`)
    docker: DockerSection | None = None  # docker: which containers
    command: CommandSection | None = None  # command: which nodes, and the commands that act on one
    # where clients connect (docker: default the containers' address labels; command: required)
    bootstrap_servers: str | None = None
    client: ClientSettings = Field(default_factory=dict)  # librdkafka settings (security) for every client

    @field_validator("dir")
    @classmethod
    def _local_has_a_directory(cls, value: str, info: ValidationInfo) -> str:
        if info.data.get("deployer", "local") == "local" and not value.strip():
            raise ValueError("is required: the local cluster's directory (as given to `kafka-canary cluster up`)")
        return value

    @field_validator("docker", "command")
    @classmethod
    def _deployer_has_its_section(cls, value: Any, info: ValidationInfo) -> Any:
        """The docker and command deployers each need the section of their name."""
        if info.data.get("deployer") == info.field_name and value is None:
            raise ValueError(f"is required with deployer {info.field_name}: {_SECTION_EXAMPLE[str(info.field_name)]}")
        return value

    @field_validator("bootstrap_servers")
    @classmethod
    def _command_has_bootstrap(cls, value: str | None, info: ValidationInfo) -> str | None:
        if info.data.get("deployer") == "command" and not (value or "").strip():
            raise ValueError("is required with deployer command (host:port of the brokers' client listener)")
        return value

    def open_deployer(self, client_config: dict[str, str] | None = None) -> Deployer:
        """The deployer this section names; `client_config` (default: this section's client settings) is how it
        reaches the cluster. Each deployer is imported only when named: the docker one needs the Docker SDK."""
        client = client_config if client_config is not None else self.client
        if self.deployer == "command":
            from canary.rollout.deployers.command import CommandDeployer

            if self.command is None or not self.bootstrap_servers:
                raise ValueError("the command deployer needs cluster.command and cluster.bootstrap_servers")
            return CommandDeployer(self.command.settings(), self.bootstrap_servers, client)
        if self.deployer == "docker":
            from canary.rollout.deployers.docker import DockerDeployer

            if self.docker is None:
                raise ValueError("the docker deployer needs cluster.docker (at least its name)")
            return DockerDeployer(self.docker.settings(), self.bootstrap_servers, client)
        from canary.rollout.deployers.local import LocalDeployer

        return LocalDeployer(self.dir)


def judge_settings(source: str | dict | None) -> JudgeConfig:
    """The JudgeConfig of a spec: defaults, a judge.yaml path, or an inline mapping."""
    from canary.judge import ConfigError, load_config
    from canary.judge.config import config_from_dict

    if isinstance(source, dict):
        return config_from_dict(source)
    if source is None or isinstance(source, str):
        return load_config(source)
    raise ConfigError(f"must be a judge.yaml path or a mapping, got {type(source).__name__}")


class JudgeSection(SpecSection):
    config: Any = None          # a judge.yaml path, an inline mapping, or None for the kind's defaults
    engine: Engine = "spark"

    @field_validator("config")
    @classmethod
    def _judge_config(cls, value: Any) -> Any:
        from canary.judge import ConfigError

        if value is not None:
            try:
                judge_settings(value)
            except CanaryError as exc:  # the field's name says "judge config" already
                raise ValueError(str(exc).removeprefix(ConfigError.PREFIX)) from None
        return value

    def settings(self, defaults: dict | None = None) -> JudgeConfig:
        """The JudgeConfig this section asks for: its config, else `defaults` (None: the judge's own)."""
        return judge_settings(self.config if self.config is not None else defaults)


class SpecIdentity(BaseModel):
    """Mixed into a kind's spec model that has `client` (settings) and `run_id`: its run id, its JSON form without
    secrets, and the secret values no file of the run may contain."""

    RUN_ID_PREFIX: ClassVar[str] = "rollout"
    if TYPE_CHECKING:  # what the spec model brings
        run_id: str | None

        @property
        def client(self) -> dict[str, str]: ...

    @property
    def effective_run_id(self) -> str:
        """The given run id, else one derived from the spec (a retried rollout finds its own run)."""
        if self.run_id:
            return self.run_id
        digest = hashlib.sha256(json.dumps(self.to_dict(), sort_keys=True).encode()).hexdigest()[:10]
        return f"{self.RUN_ID_PREFIX}-{digest}"

    def to_dict(self) -> dict[str, Any]:
        """The spec as run.json keeps it (a resumed run compares it, a derived run id hashes it): secrets masked."""
        return {**self.model_dump(), "client": redacted(self.client)}

    @property
    def secret_values(self) -> list[str]:
        """The values of the secret client settings: what no file of the run may contain."""
        return [v for k, v in self.client.items() if is_secret(k) and v]


def stored_cluster(cluster: ClusterSection) -> dict[str, Any]:
    """The cluster section as run.json keeps it: its client settings are the spec's `client` (stored masked), and a
    section it does not use is left out."""
    return {k: v for k, v in cluster.model_dump().items() if k != "client" and v is not None}


Model = TypeVar("Model", bound=BaseModel)


def validated(model: type[Model], source: object, error: type[SpecError] = SpecError) -> Model:
    """`model` from a YAML/JSON file (path) or a mapping; raises `error` naming every problem at once."""
    raw = source
    if isinstance(source, str | Path):
        path = Path(source)
        try:  # within a size limit, no aliases, no duplicate keys (canary.files)
            raw = read_spec_file(path)
        except (OSError, ValueError) as exc:  # ValueError: too large, no regular file, a NUL byte in the path
            raise error([f"cannot read the spec file {shown_path(path)}: "
                         f"{getattr(exc, 'strerror', None) or one_line(exc)}"]) from exc
        except yaml.YAMLError as exc:
            raise error([f"{shown_path(path)} is not valid YAML/JSON: {one_line(exc)}"]) from exc
    if not isinstance(raw, Mapping):
        raise error([f"the spec must be a mapping with {', '.join(model.model_fields)} at the top level"])
    try:  # keys as text: a model with its own __init__ takes them as keywords (and no field is named by a number)
        return model.model_validate({str(k): v for k, v in raw.items()})
    except ValidationError as exc:
        raise error(problems(exc, model)) from None


def with_environment(client: dict[str, str], environ: Mapping[str, str] | None) -> dict[str, str]:
    """Client settings with the KAFKA_CANARY_CLIENT_<KEY> variables of `environ` added or overriding."""
    from canary.kafka.settings import client_settings_from_env

    return client if environ is None else {**client, **client_settings_from_env(dict(environ))}
