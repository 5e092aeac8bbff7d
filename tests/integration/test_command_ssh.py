"""The command deployer's templates through a real ssh (a throwaway sshd on loopback, tests/integration/ssh_host.py):
broker config values written to run commands (`$(…)`, backquotes, quotes closed early) run nothing, however the
template quotes `{config_json}` and though the remote shell parses the command string again; a host that would be an
ssh option or shell syntax never gets past the spec."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from ssh_host import SshHost, ssh_host

from canary.errors import InfrastructureError
from canary.process import free_port
from canary.rollout.broker.spec import load_spec
from canary.rollout.core.spec import SpecError
from canary.rollout.deployers import commands
from canary.rollout.deployers.base import CommandSettings
from canary.rollout.deployers.command import CommandDeployer

pytestmark = [pytest.mark.integration, pytest.mark.parallel]


@pytest.fixture(scope="module")
def sshd() -> Iterator[SshHost]:
    with ssh_host() as host:
        yield host


def hostile(tmp: Path) -> dict[str, str]:
    """Config values that each try to touch a pwned file, one way or another."""
    return {"message.max.bytes": f"$(touch {tmp}/pwned1)",
            "x": f"`touch {tmp}/pwned2`",
            "y": f"a'; touch {tmp}/pwned3; echo '",
            "z": f'"; touch {tmp}/pwned4; echo "'}


def pwned(tmp: Path) -> list[str]:
    return sorted(p.name for p in tmp.glob("pwned*"))


def roll(sshd: SshHost, template: str, config: dict[str, str]) -> None:
    settings = CommandSettings(brokers={1: sshd.target}, roll=template, describe="echo 3.9.2 running", timeout=60)
    CommandDeployer(settings, "127.0.0.1:1").roll_broker(1, version="3.9.2", config=config, rack=None,
                                                          client_delay_ms=0)


def test_the_sshd_runs_commands_as_the_current_user(sshd: SshHost, tmp_path: Path) -> None:
    roll(sshd, f"{sshd.prefix} {{host}} 'id -un; echo {{version}}' > {tmp_path}/who # {{config_file}}", {})
    assert (tmp_path / "who").read_text().split() == [sshd.user, "3.9.2"]


def test_the_remote_shell_parses_again_so_plain_json_through_ssh_runs_a_value(sshd: SshHost, tmp_path: Path) -> None:
    """The control: the same values as plain JSON (what {config_json} held before inert_json) do run on the host
    through `ssh {host} … {config_json}`, each value shell-quoted locally notwithstanding, so the tests below can
    tell."""
    config = hostile(tmp_path)
    commands.run("roll", f"{sshd.prefix} {{host}} echo {{config_json}} > {tmp_path}/seen", {
        "host": sshd.target, "config_json": json.dumps(config)}, 60)
    assert (tmp_path / "seen").exists()
    assert pwned(tmp_path) == ["pwned1", "pwned2"]


def test_no_value_runs_anything_through_ssh_however_the_template_quotes_it(sshd: SshHost, tmp_path: Path) -> None:
    config = hostile(tmp_path)
    ssh = sshd.prefix
    templates = {
        "seen-1": f"{ssh} {{host}} echo {{version}} {{config_json}} > {tmp_path}/seen-1",   # the remote shell parses
        "seen-2": f'{ssh} {{host}} "echo {{config_json}}" > {tmp_path}/seen-2',             # double quotes, remote
        "seen-3": f'echo "{{config_json}}" > {tmp_path}/seen-3',                              # double quotes, local
        "seen-4": f'cat {{config_file}} | {ssh} {{host}} "cat > {tmp_path}/seen-4"',          # streamed over ssh
        "seen-5": f"{ssh} {{host}} echo \\'{{config_json}}\\' > {tmp_path}/seen-5",           # quoted for the remote
        "seen-6": f"echo {{config_json}} > {tmp_path}/seen-6",                                # as documented, local
    }
    for name, template in templates.items():
        roll(sshd, template, config)
        assert (tmp_path / name).exists(), name
        assert pwned(tmp_path) == [], f"{name}: {template}"

    escaped = {k: commands.inert_json(v)[1:-1] for k, v in config.items()}  # each value's \u-escaped JSON body
    # seen-1: the remote shell took the JSON apart (bash brace expansion at its commas, its quotes removed), but
    # each value arrived whole, as \u escapes: one word key:value per setting.
    version, *words = (tmp_path / "seen-1").read_text().split()
    assert version == "3.9.2" and words == [f"{k}:{v}" for k, v in escaped.items()]
    assert {k: json.loads(f'"{v}"') for k, v in (w.split(":", 1) for w in words)} == config

    # seen-2 and seen-3: the template's double quotes end at the JSON's own first double quote, so the values
    # stand unquoted and their backslashes are taken away. Nothing runs, and what is left is no JSON: a template
    # must not quote {config_json} (its value is quoted for the shell already), and the spec refuses one that does
    # (test_a_template_that_quotes_a_placeholder_is_refused_by_the_spec); the deployer is safe without that check.
    mangled = commands.inert_json(config).replace('"', "").replace("\\", "")
    assert (tmp_path / "seen-2").read_text() == mangled + "\n"
    seen_3 = (tmp_path / "seen-3").read_text()
    assert seen_3 == f"'{mangled}'\n"
    with pytest.raises(ValueError):
        json.loads(seen_3.strip().removeprefix("'").removesuffix("'"))

    # seen-4: the properties file, every value as it was, through a file and ssh's stdin.
    assert (tmp_path / "seen-4").read_text().splitlines() == [f"{k}={v}" for k, v in sorted(config.items())]

    # seen-5 and seen-6: the JSON unchanged, through the remote shell (in single quotes there, which it cannot
    # close: a ' is \u0027) and locally unquoted.
    assert json.loads((tmp_path / "seen-5").read_text()) == config
    assert json.loads((tmp_path / "seen-6").read_text()) == config


def raw_spec(host: str) -> dict:
    return {"cluster": {"deployer": "command", "bootstrap_servers": "127.0.0.1:9092",
                        "command": {"brokers": {1: host}, "roll": "true {version} {config_file}",
                                    "describe": "echo 3.9.2"}},
            "change": {"config": {"a": "b"}}, "canary": {"brokers": [1]}}


def test_a_host_that_is_an_ssh_option_would_run_its_proxy_command(tmp_path: Path) -> None:
    """The control for the spec's check below: quoted, such a host is still one argument starting with -, and ssh
    runs its ProxyCommand on this machine before connecting anywhere."""
    with pytest.raises(commands.CommandFailed):
        commands.run("roll", "ssh -o BatchMode=yes -o ConnectTimeout=5 {host} true",
                     {"host": f"-oProxyCommand=touch {tmp_path}/pwned1"}, 60)
    assert pwned(tmp_path) == ["pwned1"]


@pytest.mark.parametrize("host", ["-oProxyCommand=touch {tmp}/pwned1", "-oProxyCommand=touch${IFS}{tmp}/pwned2",
                                  "a$(touch {tmp}/pwned3)", "h;touch {tmp}/pwned4", "h`touch {tmp}/pwned5`",
                                  "-oProxyCommand=touch /tmp/x", "a$(id)", "h;id"])
def test_a_host_that_would_be_an_option_or_shell_syntax_never_gets_past_the_spec(host: str, tmp_path: Path) -> None:
    """`ssh {host} …` with a host of -oProxyCommand=… would run the proxy command locally (shell quoting keeps it
    one argument, still an option to ssh); the spec refuses such hosts before anything runs."""
    host = host.replace("{tmp}", str(tmp_path))
    with pytest.raises(SpecError) as err:
        load_spec(raw_spec(host))
    # The value is shown shortened when long (tmp_path is longer under pytest-xdist): its start says which it was.
    said = str(err.value)
    assert f"cluster.command.brokers.1: {host[:12]!r}"[:-1] in said and "must be a host name or address" in said, said
    assert pwned(tmp_path) == []


@pytest.mark.parametrize("host", ["127.0.0.1", "root@127.0.0.1", "kafka-1.example.com", "[::1]", "fe80::1%eth0"])
def test_hosts_as_ssh_takes_them_pass_the_spec(host: str) -> None:
    spec = load_spec(raw_spec(host))
    assert spec.cluster.command is not None and dict(spec.cluster.command.brokers) == {1: host}


@pytest.mark.parametrize("roll", ['ssh {host} "kafka-roll {version} {config_json}"', "echo '{config_json}' {version}",
                                  'x {version} "$(cat {config_file})"'])
def test_a_template_that_quotes_a_placeholder_is_refused_by_the_spec(roll: str) -> None:
    raw = raw_spec("127.0.0.1")
    raw["cluster"]["command"]["roll"] = roll
    with pytest.raises(SpecError, match=r"cluster\.command\.roll: .* inside quotes; write placeholders bare"):
        load_spec(raw)


def test_ssh_that_cannot_reach_its_host_is_an_infrastructure_failure_not_the_node_s_answer(sshd: SshHost) -> None:
    """ssh exits 255 when it cannot connect: the deployer's road broke, not the broker (a rollout then rolls back
    what it changed and ends UNFINISHED, exit 4: tests/unit/rollout/core/test_infrastructure_failure.py). A remote
    command that fails is the node's answer: a failed roll, ROLLBACK."""
    closed = free_port()
    with pytest.raises(commands.CommandUnavailable, match=r"exited with status 255 \(ssh could not reach"):
        commands.run("roll", f"{dataclasses.replace(sshd, port=closed).prefix} {{host}} true",
                     {"host": sshd.target}, 60)
    with pytest.raises(commands.CommandFailed) as failed:
        commands.run("roll", f"{sshd.prefix} {{host}} 'exit 1'", {"host": sshd.target}, 60)
    assert not isinstance(failed.value, InfrastructureError)
