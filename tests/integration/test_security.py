"""A SASL_SSL cluster (SCRAM-SHA-512 over TLS, certificates made by the project) on real brokers: clients without the
right credentials are refused with a clear error, the probe and the whole broker rollout run on it, restarts, the delay
proxy and an added broker keep working, and no file the rollout, a sweep or the cluster wrote, nor any page the plugin
serves of them, holds the password."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import running_cluster
from waiting import wait_until

from canary.cluster.distribution import TARGET_VERSION
from canary.cluster.local import LocalCluster
from canary.cluster.security import load_secrets
from canary.demo import FAST_JUDGE, GOOD_CONFIG
from canary.kafka import health
from canary.kafka.admin import TopicAdmin
from canary.kafka.clients import admin_client
from canary.kafka.secrets import MASK
from canary.roundtrip import ensure_topic, round_trip

pytestmark = [pytest.mark.integration, pytest.mark.parallel]
KAFKA_CANARY = str(Path(sys.executable).parent / "kafka-canary")
UP_SECONDS: dict[str, float] = {}


def _cli(*args: str, env: dict[str, str] | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([KAFKA_CANARY, *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


def _files_holding(root: Path, secret: str, skip: tuple[Path, ...] = ()) -> list[str]:
    """Every file under `root` (recursively) whose bytes contain `secret`."""
    needle = secret.encode()
    return sorted(str(p) for p in root.rglob("*") if p.is_file() and p not in skip and needle in p.read_bytes())


@pytest.fixture(scope="module")
def secured() -> Iterator[LocalCluster]:
    """1 controller + 3 brokers whose client listener is SASL_SSL."""
    started = time.monotonic()
    with running_cluster("secured", brokers=3, security="sasl_ssl") as cluster:
        UP_SECONDS["sasl_ssl"] = round(time.monotonic() - started, 1)
        print(f"\nsecured cluster (1 controller + 3 brokers) up and healthy in {UP_SECONDS['sasl_ssl']} s")
        yield cluster


def test_a_secured_cluster_keeps_its_secrets_private_and_shows_the_settings_without_them(secured):
    secrets = load_secrets(secured.directory)
    folder = secured.directory / "security"
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    for private in ("secrets.json", "ca.p12", "broker-1.p12", "broker-3.p12"):
        assert stat.S_IMODE((folder / private).stat().st_mode) == 0o600, private
    state = json.loads((secured.directory / "cluster.json").read_text())
    assert (state["security"], state["secrets_file"]) == ("sasl_ssl", str(folder / "secrets.json"))
    props = (secured.directory / "nodes" / "1" / "server.properties")
    assert stat.S_IMODE(props.stat().st_mode) == 0o600  # it holds the keystore password

    status = _cli("cluster", "status", "--json", "--dir", str(secured.directory))
    assert status.returncode == 0, status.stderr
    shown = json.loads(status.stdout)
    assert shown["healthy"] and shown["security"] == "sasl_ssl"
    assert shown["client"] == {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
                               "sasl.username": "admin", "ssl.ca.location": str(folder / "ca.pem")}
    without = _cli("cluster", "client-config", "--json", "--dir", str(secured.directory))
    assert json.loads(without.stdout) == shown["client"] and "--show-secret" in without.stderr
    with_secret = _cli("cluster", "client-config", "--show-secret", "--dir", str(secured.directory))
    assert f"sasl.password={secrets.password}\n" in with_secret.stdout
    for text in (status.stdout, status.stderr, without.stdout, without.stderr,
                 (secured.directory / "cluster.json").read_text()):
        assert secrets.password not in text and secrets.store_password not in text

    client = secured.client_config()
    ensure_topic(secured.bootstrap_servers, "secured-rt", [1, 2, 3], client=client)
    assert all(r.ok for r in round_trip(secured.bootstrap_servers, "secured-rt", client=client))


def test_clients_without_credentials_or_with_a_wrong_password_are_refused_clearly(secured):
    brokers = [1, 2, 3]
    plaintext = health.check(secured.bootstrap_servers, brokers, timeout=5)
    assert "needs security.protocol SASL_SSL" in plaintext.error, plaintext.error
    wrong = health.check(secured.bootstrap_servers, brokers, timeout=5,
                         client_config={**secured.client_config(), "sasl.password": "not-the-password"})
    assert "SASL authentication error" in wrong.error and "check sasl.username and sasl.password" in wrong.error
    no_ca = {k: v for k, v in secured.client_config().items() if k != "ssl.ca.location"}
    untrusted = health.check(secured.bootstrap_servers, brokers, timeout=5, client_config=no_ca)
    assert "certificate verify failed" in untrusted.error, untrusted.error


def test_the_probe_runs_on_the_secured_cluster_with_the_password_from_the_environment(secured, tmp_path):
    password = load_secrets(secured.directory).password
    observations = tmp_path / "observations.jsonl"
    done = _cli("probe", "--bootstrap-servers", secured.bootstrap_servers, "--config", secured.state.client_config,
                "--duration", "8s", "--rate", "10", "--observations-file", str(observations), "--json",
                env={"KAFKA_CANARY_CLIENT_SASL_PASSWORD": password}, timeout=120)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    lanes = summary["lanes"].values()
    print(f"\nprobe on the secured cluster: {json.dumps(summary['lanes'])}")
    # Produced, acknowledged and consumed back through SASL_SSL, none lost. (Produce timeouts are the machine's load:
    # a fresh cluster's first TLS connections are slow on a saturated 2-core machine.)
    assert sum(t["acked"] for t in lanes) > 0 and sum(t["delivered"] for t in lanes) > 0
    assert sum(t["lost"] for t in lanes) == 0
    assert summary["observations"]["written"] > 0  # to the observations topic, through SASL_SSL too
    assert f'"sasl.password": "{MASK}"' in done.stderr and password not in done.stderr + done.stdout
    assert observations.stat().st_size > 0 and password.encode() not in observations.read_bytes()


def test_the_whole_broker_rollout_runs_on_the_secured_cluster_and_no_artifact_holds_the_password(secured, tmp_path):
    secrets = load_secrets(secured.directory)
    spec = {"cluster": {"dir": str(secured.directory), "client": secured.client_config(with_secret=False)},
            "change": {"config": GOOD_CONFIG}, "canary": {"count": 1},
            "probe": {"window": "40s", "interim_interval": "10s", "rate": 60, "preflight": "3s", "calibration": "3s"},
            "judge": {"engine": "inline", "config": FAST_JUDGE}, "timeouts": {"guard": "60s", "warm_up": "120s"},
            "capacity": "not_required", "run_id": "secured"}
    # 40 s at 60 msg/s per partition: past the judge's 15 s warm-up, the canary's one partition still gives the
    # 1,000 observations the rate metrics need on a loaded machine (30 s at 50 msg/s gave 801: INCONCLUSIVE).
    spec_file = tmp_path / "rollout.yaml"
    spec_file.write_text(json.dumps(spec))
    runs = tmp_path / "runs"  # the runs' root, where the runs index is kept too
    run_dir = runs / "secured"

    started = time.monotonic()
    done = _cli("rollout", "run", "--spec", str(spec_file), "--json", timeout=600,
                env={"KAFKA_CANARY_CLIENT_SASL_PASSWORD": secrets.password, "KAFKA_CANARY_RUNS": str(runs)})
    took = time.monotonic() - started
    result = json.loads(done.stdout)
    print(f"\nrollout on the secured cluster: {result['outcome']} ({result['status']}) in {took:.0f} s: "
          f"{result['reason']}")

    # It ended verified, judged by the gate: no step failed for want of credentials (a failure would be a
    # ROLLBACK verdict without an engine) and none had to be retried.
    assert done.returncode in (0, 1) and result["status"] in ("verified promoted", "verified rolled_back"), done
    run = json.loads((run_dir / "run.json").read_text())
    assert run["verdict"]["engine"] in ("inline", "interim"), run["verdict"]
    gated = ["preflight", "deploy-canary", "warm-up", "lead", "probe-window", "verify"]
    gated += [] if run["window"]["stopped_early"] else ["judge"]  # a fail-fast look decided without it
    gated += ["promote" if result["outcome"] == "PROMOTE" else "rollback"]
    assert {name: (s["status"], s["attempts"]) for name, s in run["steps"].items()} == {
        name: ("done", 1) for name in gated}
    assert run["spec"]["client"]["sasl.password"] == MASK
    secured.reload()
    want = GOOD_CONFIG if result["outcome"] == "PROMOTE" else {}  # the whole fleet changed, or none of it
    assert [(b.node_id, b.config, b.rack) for b in secured.state.brokers] == [(b, want, None) for b in (1, 2, 3)]
    probes = [run["steps"][s]["result"]["probe"] for s in ("deploy-canary", "promote", "rollback") if s in run["steps"]]
    assert probes and all(p["acked"] > 0 and p["lost"] == 0 for p in probes), probes

    # Every artifact: the run directory (run.json, audit.jsonl, report.html, observations, analysis), the runs index
    # beside it, the cluster's state file, the command's output, and everything the cluster wrote (configs, logs,
    # data) but its secrets file.
    audit = run_dir / "audit.jsonl"
    assert audit.exists() and (run_dir / "report.html").exists() and (runs / "runs-index.json").exists()
    assert len(list(run_dir.rglob("*"))) > 5
    assert _files_holding(runs, secrets.password) == []
    assert _files_holding(runs, secrets.store_password) == []
    assert secrets.password not in done.stdout + done.stderr
    assert _files_holding(secured.directory, secrets.password, skip=(secured.directory / "security" / "secrets.json",
                                                                     )) == []
    configs = tuple(secured.directory.glob("nodes/*/server.properties"))  # the keystore password, by design
    assert _files_holding(secured.directory, secrets.store_password,
                          skip=(secured.directory / "security" / "secrets.json", *configs)) == []

    # A health sweep beside it (its report in the history, its row in the runs index), and every page the plugin
    # serves of them: the runs index, the rollout's and the sweep's report.
    history = tmp_path / "history"
    swept = _cli("sweep", "--bootstrap-servers", secured.bootstrap_servers, "--config", secured.state.client_config,
                 "--cluster-name", "secured", "--duration", "5s", "--rate", "10", "--json", timeout=180,
                 env={"KAFKA_CANARY_CLIENT_SASL_PASSWORD": secrets.password, "KAFKA_CANARY_RUNS": str(runs),
                      "KAFKA_CANARY_HISTORY": str(history)})
    assert swept.returncode in (0, 1, 3), swept.stderr[-2000:]
    sweep_id = json.loads(swept.stdout)["sweep_id"]
    assert _files_holding(history, secrets.password) == [] and secrets.password not in swept.stdout + swept.stderr
    pages = _plugin_pages(runs, history, ["/", "/runs/secured/report.html", f"/sweeps/secured/{sweep_id}/report.html"])
    assert "secured" in pages["/"] and f"sweep-secured-{sweep_id}" in pages["/"]
    assert not [url for url, text in pages.items() if secrets.password in text or secrets.store_password in text]


def _plugin_pages(runs: Path, history: Path, urls: list[str]) -> dict[str, str]:
    """The pages the Airflow plugin serves at `urls`, to a logged-in user, over the runs and sweep history here."""
    from airflow.api_fastapi.core_api.security import get_user
    from fastapi.testclient import TestClient
    from kafka_canary_provider import plugin

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("KAFKA_CANARY_RUNS", str(runs))
        patch.setenv("KAFKA_CANARY_HISTORY", str(history))
        app = plugin.create_app()
        app.dependency_overrides[get_user] = lambda: object()
        client = TestClient(app)
        pages = {url: client.get(url) for url in urls}
    assert all(page.status_code == 200 for page in pages.values()), {u: p.status_code for u, p in pages.items()}
    return {url: page.text for url, page in pages.items()}


def _lead_again(cluster: LocalCluster, topic: str, broker: int) -> None:
    """Preferred leader elections until `broker` leads its partition of `topic` (partition broker - 1) again."""
    admin = TopicAdmin(cluster.bootstrap_servers, cluster.client_config())

    def leads() -> bool:
        admin.elect(topic, [broker - 1])
        return admin.admin.list_topics(timeout=10).topics[topic].partitions[broker - 1].leader == broker
    wait_until(leads, 90, f"broker {broker} leading {topic}-{broker - 1} again")


def test_restarts_the_delay_proxy_and_an_added_broker_keep_working_with_security(secured):
    client = secured.client_config()
    # Another version, config and rack, and a delay proxy in front of the client listener, in one restart: TLS passes
    # through the proxy and the advertised 127.0.0.1:<proxy port> still matches the certificate's SAN.
    secured.restart_node(3, version=TARGET_VERSION, config={"num.io.threads": "5"}, rack="r3", client_delay_ms=80)
    _lead_again(secured, "secured-rt", 3)
    trips = round_trip(secured.bootstrap_servers, "secured-rt", client=client)
    assert all(r.ok for r in trips), trips
    assert [r.ack_ms >= 80 for r in trips if r.leader == 3] == [True], trips

    added = secured.add_broker()
    assert (secured.directory / "security" / f"broker-{added}.p12").exists()
    ensure_topic(secured.bootstrap_servers, "on-the-new-broker", [added], client=client)
    assert all(r.ok and r.leader == added for r in round_trip(secured.bootstrap_servers, "on-the-new-broker",
                                                               client=client))
    admin = admin_client(secured.bootstrap_servers, client)
    for future in admin.delete_topics(["on-the-new-broker"], operation_timeout=30).values():
        future.result(timeout=30)
    wait_until(lambda: not health.partitions_hosted_by(secured.bootstrap_servers, added, client_config=client), 60,
               f"broker {added} hosting no replica")
    secured.remove_broker(added)  # the Kafka tool (kafka-cluster unregister) authenticates with a 0600 config file
    assert added not in health.check(secured.bootstrap_servers, [1, 2, 3], client_config=client).registered_brokers
    assert not list((secured.directory / "security").glob(".tool-*")) and not list(
        (secured.directory / "security").glob(f"broker-{added}.*"))
    assert secured.features().finalized["metadata.version"] > 0
    assert secured.health().healthy
