"""Issue 35: credentials in URLs refused everywhere without being echoed, the project's own variables kept out of
the client settings, Airflow answers of the wrong shape named, and every CLI entry point turning anything
unexpected into one line and exit 2 (never 1, which a release pipeline reads as ROLLBACK)."""

from __future__ import annotations

import argparse
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from canary import cli, cluster_cli
from canary.kafka.secrets import CredentialsInUrl, has_credentials, redact_urls, redacted, refuse_credentials
from canary.kafka.settings import ConfigError, client_settings_from_env
from canary.probe import config as probe_config
from canary.release import AirflowClient, ReleaseError
from canary.rollout.broker.spec import load_spec
from canary.rollout.core.spec import SpecError
from canary.storage import open_store
from canary.sweep.config import SweepConfig

PASSWORD = "s3cret"


@pytest.mark.parametrize(("url", "carries"), [
    ("http://admin:s3cret@h:8080", True), ("s3://KEY:s3cret@bucket/x", True), ("tcp://admin:s3cret@h:2376", True),
    ("s3://KEY@bucket/x", True), ("admin:s3cret@h:9092", True), ("h1:9092,u:s3cret@h2:9092", True),
    ("ssh://deploy@h", False), ("ssh://deploy:s3cret@h", True), ("http://h:8080/a@b", False), ("h:9092", False),
])
def test_the_one_rule_for_credentials_in_a_url(url, carries):
    assert any(has_credentials(item) for item in url.split(",")) is carries
    if carries:
        with pytest.raises(CredentialsInUrl) as refused:
            refuse_credentials(url, "put them in $X", where="--url")
        assert str(refused.value).startswith("--url: must not carry credentials") and "$X" in str(refused.value)
        assert PASSWORD not in str(refused.value)


def test_credentials_that_reach_free_text_are_masked():
    text = "failed: s3://KEY:s3cret@bucket/x and http://admin:s3cret@h/a, ssh://deploy@h, s3://KEYONLY@b"
    assert redact_urls(text) == ("failed: s3://KEY:***@bucket/x and http://admin:***@h/a, ssh://deploy@h, "
                                 "s3://***@b")


def test_every_place_that_takes_a_url_refuses_credentials_without_echoing_them():
    places = [
        (SpecError, lambda: load_spec({"cluster": {"deployer": "docker", "docker": {
            "name": "x", "host": "tcp://admin:s3cret@h:2376"}}, "change": {"version": "4.1.2"},
            "canary": {"count": 1}}),
         "cluster.docker.host: must not carry credentials"),
        (CredentialsInUrl, lambda: open_store("http://admin:s3cret@h/runs"), "storage URL: must not carry"),
        (CredentialsInUrl, lambda: open_store("s3://KEY:s3cret@bucket/x"), "AWS_SECRET_ACCESS_KEY"),
        (Exception, lambda: SweepConfig(bootstrap_servers="h:9092", history="http://u:s3cret@h/x"),
         "history: must not carry credentials"),
        (CredentialsInUrl, lambda: AirflowClient("http://admin:s3cret@h:8080", token="t"), "AIRFLOW_API_TOKEN"),
        (CredentialsInUrl, lambda: probe_config.load("admin:s3cret@h:9092", environ={}),
         "sasl.username and sasl.password"),
    ]
    for error, make, named in places:
        with pytest.raises(error) as refused:
            make()
        assert named in str(refused.value) and PASSWORD not in str(refused.value)


def test_an_ssh_docker_engine_with_a_login_name_is_accepted():
    spec = load_spec({"cluster": {"deployer": "docker", "docker": {"name": "x", "host": "ssh://deploy@h"}},
                      "change": {"version": "4.1.2"}, "canary": {"count": 1}})
    assert spec.cluster.docker.host == "ssh://deploy@h"


def test_the_oauthbearer_config_is_a_secret():
    assert redacted({"sasl.oauthbearer.config": "clientSecret=s3cret", "sasl.mechanism": "OAUTHBEARER"}) == {
        "sasl.oauthbearer.config": "***", "sasl.mechanism": "OAUTHBEARER"}


def test_the_projects_own_variables_are_no_client_settings():
    env = {"KAFKA_CANARY_CLIENT_MARKER": "blue", "KAFKA_CANARY_CLIENT_SASL_MECHANISM": "PLAIN", "OTHER": "x"}
    assert client_settings_from_env(env) == {"sasl.mechanism": "PLAIN"}
    for name in ("KAFKA_CANARY_CLIENT_", "KAFKA_CANARY_CLIENT___"):
        with pytest.raises(ConfigError, match=f"environment variable '{name}' names no client setting"):
            client_settings_from_env({name: "x"})


@pytest.mark.parametrize(("body", "content_type", "named"), [
    ("<html><body>Sign in</body></html>", "text/html; charset=utf-8", "answered GET /api/v2/dags/d with text/html"),
    ("[1, 2]", "application/json", "answered GET /api/v2/dags/d with a JSON list"),
])
def test_an_airflow_answer_that_is_no_json_object_is_named(body, content_type, named):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body.encode())

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with pytest.raises(ReleaseError, match="not the JSON object of Airflow's REST API") as refused:
            AirflowClient(f"http://127.0.0.1:{server.server_address[1]}", token="t", timeout=5).dag("d")
        assert named in str(refused.value)
    finally:
        server.shutdown()


# ----- every entry point: one line and exit 2 -----

def test_an_unexpected_error_is_one_line_and_exit_2_with_the_traceback_kept(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.delenv(cli.DEBUG_ENV, raising=False)
    monkeypatch.setattr(cli.tempfile, "tempdir", None)

    def crash(args):
        raise KeyError("from s3://KEY:s3cret@bucket/x")

    monkeypatch.setattr(cluster_cli, "cmd_cluster_status", crash)
    assert cli.main(["cluster", "status", "--dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and PASSWORD not in err, err
    assert err.startswith("error: unexpected KeyError: 'from s3://KEY:***@bucket/x' (the traceback is in ")
    [kept] = tmp_path.glob("kafka-canary-error-*.txt")
    assert "Traceback" in kept.read_text() and "in crash" in kept.read_text() and PASSWORD not in kept.read_text()

    monkeypatch.setenv(cli.DEBUG_ENV, "1")  # someone debugging sees it on stderr too
    assert cli.main(["cluster", "status", "--dir", str(tmp_path)]) == 2
    assert "Traceback" in capsys.readouterr().err


def _entry_points(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], list]]:
    """Every leaf command (`cluster restart-broker`, `rollout run`, …) with its options."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        return [(path, [a for a in parser._actions if a.option_strings and a.dest != "help"])]
    return [leaf for name, child in subs[0].choices.items() for leaf in _entry_points(child, (*path, name))]


ENTRY_POINTS = _entry_points(cli.build_parser())
HOSTILE = ["", "-", "--", "-1", "0", "nan", "inf", "-inf", "1e309", "70000", "x" * 5000, "\x00", "\n", "é\u202e",
           "$(touch F)", "; rm -rf /", "http://admin:s3cret@h", "s3://K:s3cret@b/x", "../../etc", "/dev/zero",
           "/etc", "{version}", "a=b\\", "=", "--help-me", "-oProxyCommand=x", "[]", "{}", "null"]


@st.composite
def hostile_argv(draw) -> list[str]:
    """An entry point, then its own options with hostile values and hostile words, and always one thing it refuses
    (a misspelt option) so that nothing past argument parsing runs: no cluster, no network, no files."""
    path, options = draw(st.sampled_from(ENTRY_POINTS))
    words: list[str] = []
    for _ in range(draw(st.integers(0, 6))):
        if options and draw(st.booleans()):
            words.append(draw(st.sampled_from(draw(st.sampled_from(options)).option_strings)))
        words.append(draw(st.sampled_from(HOSTILE) | st.text(max_size=30)))
    # before any `--`, after which it would be a positional argument, not an option refused
    last = words.index("--") if "--" in words else len(words)
    words.insert(draw(st.integers(0, last)), "--no-such-option-" + draw(st.sampled_from(["x", "1", "é"])))
    return [*path, *words]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(argv=hostile_argv())
@example(argv=["probe", "--no-such-option-x", "", "--observations-file", "x" * 5000])  # a name the system refuses
def test_hostile_arguments_to_any_entry_point_are_one_line_and_exit_2(argv, capsys):
    with pytest.raises(SystemExit) as exited:
        cli.main(argv)
    out, err = capsys.readouterr()
    assert exited.value.code == 2, (argv, err)
    assert "Traceback" not in err and err.count("\n") == 1 and err.startswith("error: "), (argv, err)
    assert PASSWORD not in out + err, (argv, err)


def test_every_entry_point_is_driven():
    names = {" ".join(path) for path, _ in ENTRY_POINTS}
    assert {"probe", "release", "sweep", "analyze", "rollout run", "cluster restart-broker", "client-rollout run",
            "migrate-protocol"} <= names
