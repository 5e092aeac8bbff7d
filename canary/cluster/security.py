"""SASL_SSL for the local cluster: TLS certificates made by the project, SCRAM-SHA-512 credentials, and the client
settings that go with them.

`kafka-canary cluster up --security sasl_ssl` gives every broker's client listener SASL_SSL with SCRAM-SHA-512.
The replication (inter-broker) and controller listeners stay PLAINTEXT on loopback: they never leave the host, no
kafka-canary client uses them, and TLS there would cost CPU on every replicated byte. A local user can reach the
cluster through them without a password; docs/security.md says so.

Everything lives in `<dir>/security/` (mode 0700):

    ca.p12            the cluster's CA: key and self-signed certificate (PKCS12)
    ca.pem            the CA certificate (librdkafka's ssl.ca.location)
    truststore.p12    the CA certificate for Java clients (the Kafka tools)
    broker-<id>.p12   each broker's key and certificate (SAN ip:127.0.0.1, dns:localhost), signed by the CA
    client.properties the librdkafka settings a client needs, without the password
    secrets.json      (0600) the SCRAM user's password and the stores' password

Keys and certificates are made with Java's keytool (many commands in one JVM: `resources/Keytool.java`),
passwords reach keytool and the storage tool through the environment or a 0600 file, never a command line.
The SCRAM credential of the admin user is written into the metadata log when the controllers are formatted
(`kafka-storage format --add-scram`, Kafka 3.5 or newer). There is no authorizer: the one user is the
operator, and an authenticated client may do everything an operator may.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import subprocess
from dataclasses import dataclass
from pathlib import Path

from canary.cluster.distribution import RESOURCES, require_java
from canary.errors import ClusterError

PLAINTEXT = "plaintext"
SASL_SSL = "sasl_ssl"
MODES = (PLAINTEXT, SASL_SSL)
MECHANISM = "SCRAM-SHA-512"
ADMIN_USER = "admin"
SECURITY_DIR = "security"
SECRETS_FILE = "secrets.json"
CLIENT_FILE = "client.properties"
CLIENT_LISTENER = "CLIENT"  # the client listener's name on a secured cluster (PLAINTEXT on a plain one)
CERT_DAYS = 3650
_STORE_ENV = "KAFKA_CANARY_STORE_PASSWORD"
_SCRAM_LOGIN = "org.apache.kafka.common.security.scram.ScramLoginModule"


@dataclass(frozen=True)
class Secrets:
    """What secrets.json holds."""
    username: str
    password: str        # the SCRAM user's password: sasl.password
    store_password: str  # every keystore's and the truststore's password

    def to_dict(self) -> dict:
        return {"sasl.username": self.username, "sasl.password": self.password, "store.password": self.store_password}


def check_mode(mode: str) -> str:
    if mode not in MODES:
        raise ClusterError(f"security {mode!r} is not known; use one of {', '.join(MODES)}")
    return mode


def security_dir(directory: Path | str) -> Path:
    return Path(directory) / SECURITY_DIR


def secrets_path(directory: Path | str) -> Path:
    return security_dir(directory) / SECRETS_FILE


def client_file(directory: Path | str) -> Path:
    return security_dir(directory) / CLIENT_FILE


def ca_pem(directory: Path | str) -> Path:
    return security_dir(directory) / "ca.pem"


def keystore(directory: Path | str, node_id: int) -> Path:
    return security_dir(directory) / f"broker-{node_id}.p12"


def write_private(path: Path, text: str) -> None:
    """Writes `text` to `path` readable by its owner only (0600), atomically; the mode is set before any byte."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def new_secrets() -> Secrets:
    # URL-safe: no ',', '=', ']' or quotes, which the storage tool's --add-scram syntax and JAAS would need escaped.
    return Secrets(ADMIN_USER, secrets.token_urlsafe(24), secrets.token_urlsafe(24))


def save_secrets(directory: Path | str, found: Secrets) -> None:
    folder = security_dir(directory)
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(folder, 0o700)
    write_private(secrets_path(directory), json.dumps(found.to_dict(), indent=2) + "\n")
    settings = client_settings(directory, found, with_secret=False)
    client_file(directory).write_text(
        "# librdkafka settings of this cluster's client listener (kafka-canary probe --config FILE).\n"
        f"# sasl.password is kept in {secrets_path(directory)}: pass it as KAFKA_CANARY_CLIENT_SASL_PASSWORD,\n"
        "# or print every setting with `kafka-canary cluster client-config --show-secret`.\n"
        + "".join(f"{k}={v}\n" for k, v in settings.items()))


def load_secrets(directory: Path | str) -> Secrets:
    path = secrets_path(directory)
    try:
        raw = json.loads(path.read_text())
    except FileNotFoundError:
        raise ClusterError(f"the secured cluster in {directory} has no credentials file {path}; it was started by "
                           f"another kafka-canary or the file was removed: start a new cluster") from None
    except PermissionError:
        raise ClusterError(f"cannot read the cluster's credentials in {path} (permission denied); run as the user "
                           f"who started the cluster") from None
    return Secrets(raw["sasl.username"], raw["sasl.password"], raw["store.password"])


def client_settings(directory: Path | str, found: Secrets | None = None, with_secret: bool = True) -> dict[str, str]:
    """The librdkafka settings a client of this cluster needs: SASL_SSL, SCRAM-SHA-512, the user, the CA that
    signed the brokers' certificates; the password only `with_secret`."""
    found = found or load_secrets(directory)
    settings = {"security.protocol": "SASL_SSL", "sasl.mechanism": MECHANISM, "sasl.username": found.username,
                "ssl.ca.location": str(ca_pem(directory))}
    if with_secret:
        settings["sasl.password"] = found.password
    return settings


def broker_properties(directory: Path | str, node_id: int, found: Secrets | None = None) -> dict[str, str]:
    """The broker settings of the SASL_SSL client listener (named CLIENT)."""
    found = found or load_secrets(directory)
    prefix = f"listener.name.{CLIENT_LISTENER.lower()}"
    return {
        f"{prefix}.sasl.enabled.mechanisms": MECHANISM,
        # The broker side of SCRAM needs a login module but no credentials: users are in the metadata log.
        f"{prefix}.{MECHANISM.lower()}.sasl.jaas.config": f"{_SCRAM_LOGIN} required;",
        "ssl.keystore.type": "PKCS12",
        "ssl.keystore.location": str(keystore(directory, node_id)),
        "ssl.keystore.password": found.store_password,
        "ssl.key.password": found.store_password,
        "ssl.client.auth": "none",
    }


def java_client_properties(directory: Path | str, found: Secrets | None = None) -> str:
    """A Java client's properties (the Kafka tools' --command-config): holds the password, write it 0600."""
    found = found or load_secrets(directory)
    return (f"security.protocol=SASL_SSL\nsasl.mechanism={MECHANISM}\n"
            f'sasl.jaas.config={_SCRAM_LOGIN} required username="{found.username}" password="{found.password}";\n'
            f"ssl.truststore.type=PKCS12\nssl.truststore.location={security_dir(directory) / 'truststore.p12'}\n"
            f"ssl.truststore.password={found.store_password}\n")


@contextlib.contextmanager
def java_client_config(directory: Path | str):
    """A temporary 0600 properties file for a Kafka tool's --config; removed afterwards."""
    path = security_dir(directory) / f".tool-{os.getpid()}-{secrets.token_hex(4)}.properties"
    write_private(path, java_client_properties(directory))
    try:
        yield path
    finally:
        path.unlink(missing_ok=True)


def scram_format_arg(found: Secrets) -> str:
    """The storage tool's --add-scram value creating the admin user (controllers' format only)."""
    return f"{MECHANISM}=[name={found.username},password={found.password}]"


# ----- certificates -----

def _store(path: Path) -> list[str]:
    return ["-keystore", str(path), "-storetype", "PKCS12", "-storepass:env", _STORE_ENV]


def _ca_commands(folder: Path, cluster_id: str) -> list[list[str]]:
    ca = folder / "ca.p12"
    return [
        ["-genkeypair", "-alias", "ca", "-keyalg", "EC", "-groupname", "secp256r1", "-validity", str(CERT_DAYS),
         "-dname", f"CN=kafka-canary CA {cluster_id}", "-ext", "bc:c", "-ext", "KeyUsage:c=keyCertSign,cRLSign",
         *_store(ca)],
        ["-exportcert", "-rfc", "-alias", "ca", "-file", str(folder / "ca.pem"), *_store(ca)],
        ["-importcert", "-noprompt", "-alias", "ca", "-file", str(folder / "ca.pem"),
         *_store(folder / "truststore.p12")],
    ]


def _broker_commands(folder: Path, node_id: int) -> list[list[str]]:
    node = folder / f"broker-{node_id}.p12"
    csr, pem = folder / f"broker-{node_id}.csr", folder / f"broker-{node_id}.pem"
    return [
        ["-genkeypair", "-alias", "broker", "-keyalg", "EC", "-groupname", "secp256r1", "-validity", str(CERT_DAYS),
         "-dname", f"CN=kafka-canary broker {node_id}", *_store(node)],
        ["-certreq", "-alias", "broker", "-file", str(csr), *_store(node)],
        # Clients check the broker's address against the SAN: brokers advertise 127.0.0.1 (delay proxies too).
        ["-gencert", "-alias", "ca", "-infile", str(csr), "-outfile", str(pem), "-rfc", "-validity", str(CERT_DAYS),
         "-ext", "SAN=ip:127.0.0.1,dns:localhost", "-ext", "EKU=serverAuth,clientAuth",
         "-ext", "KeyUsage=digitalSignature", *_store(folder / "ca.p12")],
        ["-importcert", "-noprompt", "-alias", "ca", "-file", str(folder / "ca.pem"), *_store(node)],
        ["-importcert", "-noprompt", "-alias", "broker", "-file", str(pem), *_store(node)],
    ]


def create_certificates(directory: Path | str, cluster_id: str, broker_ids: list[int],
                        found: Secrets | None = None) -> None:
    """The CA, the truststore and one keystore per broker, in `<dir>/security/`."""
    folder = security_dir(directory)
    _keytool(folder, _ca_commands(folder, cluster_id) + [c for b in broker_ids for c in _broker_commands(folder, b)],
             found or load_secrets(directory))


def add_broker_certificate(directory: Path | str, node_id: int) -> None:
    """A keystore for a broker added later, signed by the cluster's CA (a leftover one is replaced)."""
    folder = security_dir(directory)
    for suffix in (".p12", ".csr", ".pem"):
        (folder / f"broker-{node_id}{suffix}").unlink(missing_ok=True)
    _keytool(folder, _broker_commands(folder, node_id), load_secrets(directory))


def _keytool(folder: Path, commands: list[list[str]], found: Secrets, timeout: float = 120) -> None:
    if any("\t" in arg or "\n" in arg for cmd in commands for arg in cmd):
        raise ClusterError(f"the cluster directory {folder.parent} has a tab or newline in its path; choose another")
    java = require_java()
    env = {**os.environ, _STORE_ENV: found.store_password}
    batch = [java, "-XX:TieredStopAtLevel=1", "-Xshare:auto", "-Xmx128m",
             "--add-exports", "java.base/sun.security.tools.keytool=ALL-UNNAMED", str(RESOURCES / "Keytool.java")]
    lines = "".join("\t".join(cmd) + "\n" for cmd in commands)
    done = subprocess.run(batch, input=lines, capture_output=True, text=True, env=env, cwd=folder, timeout=timeout)
    if done.returncode == 0:
        _private_keys(folder)
        return
    output = (done.stdout + done.stderr).strip()
    if "kafka-canary keytool batch" in output:  # keytool itself failed
        raise ClusterError(f"making the cluster's certificates in {folder} failed: {output[-1500:]}")
    # No compiler for single-file programs (a JRE without jdk.compiler): one keytool process per command.
    keytool = Path(java).resolve().parent / "keytool"
    for cmd in commands:
        step = subprocess.run([str(keytool), "-J-XX:TieredStopAtLevel=1", *cmd], capture_output=True, text=True,
                              env=env, cwd=folder, timeout=timeout)
        if step.returncode != 0:
            raise ClusterError(f"keytool {cmd[0]} in {folder} failed: {(step.stdout + step.stderr).strip()[-1500:]}")
    _private_keys(folder)


def _private_keys(folder: Path) -> None:
    for path in folder.glob("*.p12"):
        os.chmod(path, 0o600)
