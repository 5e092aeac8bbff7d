"""The probe's HTTP endpoints: /metrics (Prometheus text), /liveness (the probe loop is alive),
/readiness (topic reconciled and a round trip succeeded), /status (JSON summary of the recent window)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest


class StatusServer:
    def __init__(self, host: str, port: int, registry: CollectorRegistry, live: Callable[[], bool],
                 ready: Callable[[], bool], status: Callable[[], dict]):
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                path = self.path.split("?", 1)[0].rstrip("/")
                if path == "/metrics":
                    self._send(200, generate_latest(registry), CONTENT_TYPE_LATEST)
                elif path == "/liveness":
                    ok = live()
                    self._send(200 if ok else 503, b"ok\n" if ok else b"probe loop stalled\n")
                elif path == "/readiness":
                    ok = ready()
                    self._send(200 if ok else 503, b"ready\n" if ok else b"not ready\n")
                elif path == "/status":
                    self._send(200, json.dumps(status(), indent=2).encode(), "application/json")
                else:
                    self._send(404, b"try /metrics, /liveness, /readiness or /status\n")

            def _send(self, code: int, body: bytes, content_type: str = "text/plain; charset=utf-8") -> None:
                self.send_response(code)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args) -> None:  # scrapes are not news
                pass

        self.server = ThreadingHTTPServer((host, port), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self._thread = threading.Thread(target=self.server.serve_forever, name="probe-http", daemon=True)
        outer._thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
