"""What both sample services share: their command line, versions, SIGTERM handling and the records log."""

from __future__ import annotations

import argparse
import json
import logging
import signal
import threading
from pathlib import Path
from typing import Any

VERSIONS = ("v1", "v2", "v2-bad")
BAD = "v2-bad"


def parser(role: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=f"python -m canary.examples.services.{role}",
                                description=f"the sample {role} service (canary/examples/services)")
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--id", required=True, help="instance id: client.id (and group.instance.id of a consumer)")
    p.add_argument("--lane", choices=("canary", "baseline"), required=True)
    p.add_argument("--version", choices=VERSIONS, required=True)
    p.add_argument("--client-config", help="a JSON file of librdkafka connection/security settings")
    p.add_argument("--records", required=True, help="JSON lines: every record acknowledged / processed")
    p.add_argument("--refresh-interval", type=float, default=2.0, help="seconds between lane view refreshes")
    p.add_argument("tag", nargs="*", help="ignored: the deployer's process marker")
    return p


def client_settings(args: argparse.Namespace) -> dict[str, Any]:
    settings = json.loads(Path(args.client_config).read_text()) if args.client_config else {}
    return {"bootstrap.servers": args.bootstrap, **settings}


def stop_on_sigterm() -> threading.Event:
    """An event set by SIGTERM or SIGINT: the service finishes its loop and closes its client cleanly."""
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    return stop


class RecordsLog:
    """One JSON line per record, flushed line by line (a killed instance loses at most the line being written)."""

    def __init__(self, path: str):
        self._file = open(path, "a", buffering=1)  # noqa: SIM115 - closed in close()
        self._lock = threading.Lock()

    def write(self, **fields: Any) -> None:
        with self._lock:
            self._file.write(json.dumps(fields, separators=(",", ":")) + "\n")

    def close(self) -> None:
        self._file.close()


def setup_logging(name: str) -> logging.Logger:
    logging.basicConfig(level=logging.INFO, format=f"%(asctime)s {name} %(levelname)s %(name)s: %(message)s")
    logging.getLogger("canary").setLevel(logging.INFO)
    return logging.getLogger(name)
