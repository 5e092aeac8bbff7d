"""A real S3-compatible object store for the tests: the Versity S3 Gateway (versitygw, Apache 2.0), built from the Go
module proxy on first use (about 80 s) and run over a private directory on 127.0.0.1.

Why versitygw: a real S3 server (not an in-process mock) that takes conditional writes (If-Match / If-None-Match on
PutObject, under a lock), checks SigV4 signatures (so wrong credentials are refused as on AWS), and builds from a
released Go module in a minute, where MinIO's much larger tree takes several on two cores.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from canary.process import free_port, terminate, wait_listening

VERSION = "v1.8.0"
MODULE = "github.com/versity/versitygw/cmd/versitygw"
BIN_DIR = Path.home() / ".cache" / "kafka-canary" / "bin"


def versitygw() -> Path:
    """The gateway's binary, built once per machine with `go install` from the module proxy."""
    binary = BIN_DIR / f"versitygw-{VERSION}"
    if binary.exists():
        return binary
    go = shutil.which("go")
    assert go, "the object-store tests build versitygw with Go: install Go (golang) first"
    build = BIN_DIR / f"build-{uuid.uuid4().hex[:8]}"
    env = {**os.environ, "GOBIN": str(build), "GOFLAGS": "-mod=mod"}
    done = subprocess.run([go, "install", f"{MODULE}@{VERSION}"], env=env, capture_output=True, text=True,
                          timeout=1200)
    assert done.returncode == 0, f"building versitygw failed:\n{done.stderr[-3000:]}"
    os.replace(build / "versitygw", binary)  # atomic: a concurrent build never leaves half a binary
    shutil.rmtree(build, ignore_errors=True)
    return binary


@dataclass(frozen=True)
class S3Server:
    endpoint: str
    access_key: str
    secret_key: str
    root: Path

    def env(self) -> dict[str, str]:
        """The standard AWS settings a process reaches the store with."""
        return {"AWS_ACCESS_KEY_ID": self.access_key, "AWS_SECRET_ACCESS_KEY": self.secret_key,
                "AWS_ENDPOINT_URL": self.endpoint, "AWS_DEFAULT_REGION": "us-east-1"}

    def make_bucket(self, name: str) -> str:
        (self.root / name).mkdir()  # the posix backend's buckets are the root's directories
        return name

    def requests(self) -> int:
        """Requests served so far, from the gateway's access log."""
        log = self.root.parent / "access.log"
        return sum(1 for _ in log.open()) if log.exists() else 0


@contextmanager
def s3_server(directory: Path) -> Iterator[S3Server]:
    """versitygw on 127.0.0.1 over `directory`, stopped afterwards."""
    root = directory / "buckets"
    root.mkdir(parents=True)
    port = free_port()
    server = S3Server(f"http://127.0.0.1:{port}", "canary-test", uuid.uuid4().hex, root)
    env = {**os.environ, "ROOT_ACCESS_KEY": server.access_key, "ROOT_SECRET_KEY": server.secret_key}
    with open(directory / "versitygw.log", "w") as log:
        proc = subprocess.Popen([str(versitygw()), "--port", f"127.0.0.1:{port}", "--access-log",
                                 str(directory / "access.log"), "posix", str(root)],
                                env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        assert wait_listening(port, 60, alive=lambda: proc.poll() is None), \
            f"versitygw did not listen within 60 s: {(directory / 'versitygw.log').read_text()[-2000:]}"
        yield server
    finally:
        terminate(proc)
