"""A throwaway OpenSSH server on loopback, for tests whose commands go through `ssh {host} …` (the remote shell parses
the command string again). It runs as the current user on 127.0.0.1 and a free port, with its own host key, one
authorized client key and its own sshd_config, all in a temporary directory; it is stopped on exit. Debian's
openssh-server (`make /usr/sbin/sshd`)."""

from __future__ import annotations

import os
import pwd
import shlex
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from canary.cluster.layout import free_ports
from canary.process import terminate, wait_listening

SSHD = Path("/usr/sbin/sshd")   # sshd re-executes itself: it must be started by its absolute path
PRIVSEP_DIR = Path("/run/sshd")  # Debian's sshd refuses to start without its privilege-separation directory
LOOPBACK = "127.0.0.1"


@dataclass(frozen=True)
class SshHost:
    port: int
    key: Path         # the authorized client key (private)
    user: str
    log: Path         # sshd's own log (-e: what it printed)

    @property
    def target(self) -> str:
        """user@127.0.0.1, the {host} of a command template."""
        return f"{self.user}@{LOOPBACK}"

    @property
    def argv(self) -> list[str]:
        """The ssh command up to the destination: the test's key and port, no host-key prompt, no password
        prompt."""
        return ["ssh", "-i", str(self.key), "-p", str(self.port), "-o", "StrictHostKeyChecking=no",
                "-o", "UserKnownHostsFile=/dev/null", "-o", "BatchMode=yes", "-o", "LogLevel=ERROR"]

    @property
    def prefix(self) -> str:
        """`argv` as shell text, to put in front of `{host}` in a command template."""
        return shlex.join(self.argv)


def _keygen(path: Path) -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "kafka-canary-test", "-f", str(path)],
                   check=True, stdin=subprocess.DEVNULL, capture_output=True, timeout=60)


@contextmanager
def ssh_host(timeout: float = 30.0) -> Iterator[SshHost]:
    """Starts sshd as the current user on 127.0.0.1, yields how to reach it once its port accepts connections,
    and stops it (terminated, waited for) on exit."""
    if not SSHD.exists():
        raise RuntimeError(f"{SSHD} is missing: run `make {SSHD}` (Debian's openssh-server)")
    PRIVSEP_DIR.mkdir(mode=0o755, parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="kafka-canary-sshd-") as tmp:
        home = Path(tmp)
        host_key, client_key = home / "host_key", home / "client_key"
        _keygen(host_key)
        _keygen(client_key)
        authorized = home / "authorized_keys"
        authorized.write_text(Path(f"{client_key}.pub").read_text())
        authorized.chmod(0o600)
        port = free_ports(1)[0]
        config = home / "sshd_config"
        config.write_text("\n".join([
            f"ListenAddress {LOOPBACK}",
            f"Port {port}",
            f"HostKey {host_key}",
            f"AuthorizedKeysFile {authorized}",
            f"PidFile {home / 'sshd.pid'}",
            "PubkeyAuthentication yes",
            "PasswordAuthentication no",
            "KbdInteractiveAuthentication no",
            "PermitRootLogin prohibit-password",
            "UsePAM no",
            "StrictModes no",
            "X11Forwarding no",
            "AllowTcpForwarding no",
            "PrintMotd no",
            "",
        ]))
        log = home / "sshd.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen([str(SSHD), "-D", "-e", "-f", str(config)], stdin=subprocess.DEVNULL,
                                    stdout=out, stderr=subprocess.STDOUT)
        try:
            if not wait_listening(port, timeout, alive=lambda: proc.poll() is None):
                why = (f"exited with status {proc.returncode}" if proc.poll() is not None
                       else f"did not listen on {LOOPBACK}:{port} within {timeout:g}s")
                raise RuntimeError(f"sshd {why}: {log.read_text()[-2000:]}")
            yield SshHost(port, client_key, _user(), log)
        finally:
            terminate(proc)


def _user() -> str:
    """The current user's name (root here), as sshd knows it: from the password database, not $USER."""
    return pwd.getpwuid(os.getuid()).pw_name
