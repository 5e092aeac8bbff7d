"""The command deployer's pieces without a cluster: templates filled in quoted, real shell commands run with their
exit status, timeout and output checked, secrets cut; describe outputs; the spec section's checks."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from canary.errors import ClusterError
from canary.fields import problems
from canary.rollout.core.spec import ClusterSection
from canary.rollout.deployers import commands
from canary.rollout.deployers.base import CommandSettings
from canary.rollout.deployers.command import CommandDeployer, parse_description


def test_each_value_is_one_shell_argument_whatever_it_holds(tmp_path: Path) -> None:
    out = tmp_path / "args"
    evil = "x; touch " + str(tmp_path / "pwned") + " $(id) `id` 'q' \"d\""
    commands.run("roll", 'printf "%s\\n" {host} {version} > ' + str(out), {"host": evil, "version": "3.9.2"}, 10)
    assert out.read_text().splitlines() == [evil, "3.9.2"]
    assert not (tmp_path / "pwned").exists()


def test_a_failing_command_names_its_status_command_and_last_output() -> None:
    with pytest.raises(commands.CommandFailed) as err:
        commands.run("roll", "echo starting; echo 'broker 2 would not start' >&2; exit 3", {}, 10)
    text = str(err.value)
    assert "the roll command exited with status 3" in text and "broker 2 would not start" in text
    assert "echo starting" in text  # the command as run
    assert err.value.output == "starting\nbroker 2 would not start"


def test_a_hanging_command_is_killed_with_its_children_at_its_timeout(tmp_path: Path) -> None:
    pid_file = tmp_path / "child"
    started = time.monotonic()
    with pytest.raises(commands.CommandFailed) as err:
        commands.run("roll", f"echo waiting; sleep 300 & echo $! > {pid_file}; wait", {}, 1.5)
    assert time.monotonic() - started < 30
    assert "did not finish within 1.5s" in str(err.value) and "waiting" in str(err.value)
    child = int(pid_file.read_text())
    deadline = time.monotonic() + 10
    while Path(f"/proc/{child}").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not Path(f"/proc/{child}").exists() or "Z" in Path(f"/proc/{child}/stat").read_text().split()[2]


def _gone(pid: int) -> bool:
    deadline = time.monotonic() + 10
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    return not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2]


def test_a_child_that_left_the_process_group_is_killed_at_the_timeout_too(tmp_path: Path) -> None:
    pid_file = tmp_path / "child"
    started = time.monotonic()
    with pytest.raises(commands.CommandFailed, match="did not finish within 1.5s"):
        commands.run("roll", f"setsid sleep 300 & echo $! > {pid_file}; wait", {}, 1.5)
    assert time.monotonic() - started < 30   # not held until the escaped child ends
    assert _gone(int(pid_file.read_text()))


def test_a_command_is_done_when_its_shell_exits_though_a_background_child_holds_its_output(tmp_path: Path) -> None:
    """`systemctl start`-like commands leave a child running with the command's output still open: the command
    succeeded when its shell exited, not when the child closes the output (it would time out and be killed)."""
    pid_file = tmp_path / "child"
    started = time.monotonic()
    result = commands.run("roll", f"echo started; sleep 30 & echo $! > {pid_file}", {}, 20)
    assert time.monotonic() - started < 15 and result.exit_code == 0 and result.output == "started"
    child = int(pid_file.read_text())
    assert Path(f"/proc/{child}").exists()   # left running: it is the command's to start, not ours to stop
    os.kill(child, 9)


def test_secret_values_never_appear_in_a_result_or_an_error() -> None:
    secret = "s3cr3t-pw"
    result = commands.run("describe", "echo {host} using " + secret, {"host": "h1"}, 10, (secret,))
    assert secret not in json.dumps(result.to_dict()) and "***" in result.output
    with pytest.raises(commands.CommandFailed) as err:
        commands.run("roll", f"echo {secret}; exit 1", {}, 10, (secret,))
    assert secret not in str(err.value)


def test_a_malformed_template_is_refused_with_how_to_write_it() -> None:
    assert commands.placeholders("ssh {host} 'kafka-roll {version}' {{literal}}") == {"host", "version"}
    for bad in ("ssh {0}", "ssh {host.name}", "ssh {host!r}"):
        with pytest.raises(ValueError, match="plain name"):
            commands.placeholders(bad)


@pytest.mark.parametrize(("output", "expected"), [
    ("3.9.2\n", ("3.9.2", None)),
    ("3.9.2 running", ("3.9.2", True)),
    ("Warning: Permanently added 'h1'\n4.1.2 inactive\n", ("4.1.2", False)),
    ('{"version": "4.1.2", "running": false}', ("4.1.2", False)),
    ('{"version": "4.1.2"}', ("4.1.2", None)),
])
def test_describe_prints_a_version_and_maybe_a_state(output: str, expected: tuple) -> None:
    assert parse_description(output, "describe") == expected


@pytest.mark.parametrize("output", ["", "latest", "3.9.2 sleeping", "3.9 running", '{"running": true}', "{oops"])
def test_an_unreadable_description_says_what_was_expected(output: str) -> None:
    with pytest.raises(ClusterError, match="must print the node's Kafka version"):
        parse_description(output, "the describe command of broker 1")


def test_a_roll_writes_exactly_the_wanted_config_and_audits_the_command(tmp_path: Path) -> None:
    seen = tmp_path / "seen"
    where = tmp_path / "where"
    settings = CommandSettings({1: "h1"}, f"cat {{config_file}} > {seen}; echo {{config_json}} {{version}} >> {seen}; "
                                          f"echo {{config_file}} > {where}", "echo 3.9.2 running")
    deployer = CommandDeployer(settings, "127.0.0.1:1", {"sasl.password": "pw-1"})
    audited: list[tuple[str, dict]] = []
    deployer.report_to(lambda action, details: audited.append((action, details)))
    deployer.roll_broker(1, version="4.1.2", config={"num.io.threads": "6"}, rack="az-1:canary-broker",
                         client_delay_ms=0)
    lines = seen.read_text().splitlines()
    assert lines[:2] == ["num.io.threads=6", "broker.rack=az-1:canary-broker"]
    assert json.loads(lines[2].rsplit(" ", 1)[0]) == {"broker.rack": "az-1:canary-broker", "num.io.threads": "6"}
    assert lines[2].endswith(" 4.1.2")
    assert [a for a, _ in audited] == ["deployer command"] and audited[0][1]["exit_code"] == 0
    assert not Path(where.read_text().strip()).exists()  # the config file lived as long as the command
    with pytest.raises(ClusterError, match="lists no broker 7"):
        deployer.roll_broker(7, version="4.1.2", config={}, rack=None, client_delay_ms=0)
    with pytest.raises(ClusterError, match="no client delay"):
        deployer.roll_broker(1, version="4.1.2", config={}, rack=None, client_delay_ms=50)


def test_a_failed_command_is_audited_before_it_is_raised() -> None:
    deployer = CommandDeployer(CommandSettings({1: "h1"}, "exit 4 # {version} {config_file}", "echo 3.9.2"), "x:1")
    audited: list[tuple[str, dict]] = []
    deployer.report_to(lambda action, details: audited.append((action, details)))
    with pytest.raises(commands.CommandFailed, match="status 4"):
        deployer.roll_broker(1, version="3.9.2", config={}, rack=None, client_delay_ms=0)
    assert audited[0][0] == "deployer command failed" and "status 4" in audited[0][1]["error"]


GOOD = {"deployer": "command", "bootstrap_servers": "k1:9092",
        "command": {"brokers": {1: "k1", "2": "k2"}, "roll": "ssh {host} kafka-roll {version} < {config_file}",
                    "describe": "ssh {host} cat /opt/kafka/VERSION"}}


def test_the_command_section_names_its_fleet_and_commands() -> None:
    cluster = ClusterSection.model_validate(GOOD)
    assert cluster.command is not None and dict(cluster.command.brokers) == {1: "k1", 2: "k2"}
    assert cluster.command.timeout == 600.0


@pytest.mark.parametrize(("change", "fragment"), [
    ({"command": None}, "command: is required with deployer command"),
    ({"bootstrap_servers": None}, "bootstrap_servers: is required with deployer command"),
    ({"bootstrap_servers": " "}, "bootstrap_servers: is required with deployer command"),
    ({"command": {**GOOD["command"], "roll": "ssh {host} restart"}}, "must use {version} and {config_file}"),
    ({"command": {**GOOD["command"], "describe": "ssh {host} {version}"}}, "describe command may use"),
    ({"command": {**GOOD["command"], "brokers": {1: "k 1"}}}, "must be a host name or address"),
    ({"command": {**GOOD["command"], "brokers": {}}}, "command.brokers"),
    ({"command": {**GOOD["command"], "controllers": {3000: "c1"}}}, "no roll_controller command"),
    ({"command": {**GOOD["command"], "timeout": "forever"}}, "command.timeout"),
])
def test_a_bad_command_section_says_what_to_fix(change: dict, fragment: str) -> None:
    with pytest.raises(Exception) as err:
        ClusterSection.model_validate({k: v for k, v in ({**GOOD, **change}).items() if v is not None})
    text = "\n".join(problems(err.value, ClusterSection))
    assert fragment in text, text


def test_brokers_the_cluster_does_not_know_are_not_running_whatever_their_describe_says() -> None:
    deployer = CommandDeployer(CommandSettings({1: "h1", 2: "h2"}, "roll {version} {config_file}",
                                               "echo 3.9.2 running # {host}"), "127.0.0.1:1")
    assert [(b.broker_id, b.version, b.running, b.config) for b in deployer.brokers()] == [
        (1, "3.9.2", False, {}), (2, "3.9.2", False, {})]


def test_stop_and_start_come_together_and_make_a_capability(tmp_path: Path) -> None:
    with pytest.raises(Exception) as err:
        ClusterSection.model_validate({**GOOD, "command": {**GOOD["command"], "stop": "ssh {host} systemctl stop k"}})
    assert "give stop and start together" in "\n".join(problems(err.value, ClusterSection))
    seen = tmp_path / "seen"
    settings = CommandSettings({1: "h1"}, "roll {version} {config_file}", "echo 3.9.2",
                               stop=f"echo stop {{host}} >> {seen}", start=f"echo start {{host}} >> {seen}")
    deployer = CommandDeployer(settings, "127.0.0.1:1")
    assert deployer.capabilities == {"stop_start", "concurrent_rolls"}
    deployer.stop_broker(1)
    deployer.start_broker(1)
    assert seen.read_text().split("\n")[:2] == ["stop h1", "start h1"]
    with pytest.raises(ClusterError, match="no stop command"):
        CommandDeployer(CommandSettings({1: "h1"}, "roll {version} {config_file}", "echo 3.9.2"), "x:1").stop_broker(1)


def test_a_secret_broker_setting_never_reaches_the_audit_log(tmp_path: Path) -> None:
    deployer = CommandDeployer(CommandSettings({1: "h1"}, "echo {config_json} {version}", "echo 3.9.2"), "x:1")
    audited: list[tuple[str, dict]] = []
    deployer.report_to(lambda action, details: audited.append((action, details)))
    deployer.roll_broker(1, version="3.9.2", config={"listener.name.internal.ssl.key.password": "k3y-pw"}, rack=None,
                         client_delay_ms=0)
    assert "k3y-pw" not in json.dumps(audited) and "***" in audited[0][1]["output"]


@pytest.mark.parametrize("text", [
    "$(touch /tmp/pwned)", "`id`", "a'; id; echo '", '"; id; echo "', "back\\slash \\u0024 \\n", "a;b|c&d<e>f(g)h",
    "two\nlines\r\n", "tab\there ~ * ? [x] ! # { } ,", "broker.rack=zürich-ä", "emoji \U0001F680 and \u00e9", "",
])
def test_inert_json_means_the_same_and_holds_nothing_a_shell_acts_on(text: str) -> None:
    value = {text: text, "list": [text, 1, True, None], "plain.key": "6"}
    out = commands.inert_json(value)
    assert json.loads(out) == value
    assert not set(out) & set("$`';|&<>() \n\r\t~*?!#")
    assert out.isascii()
