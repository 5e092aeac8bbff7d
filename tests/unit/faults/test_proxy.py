"""The delaying TCP proxy on real loopback sockets: an echo server behind it, clients in front."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import statistics
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from canary import process
from canary.faults import proxy as delay_proxy
from canary.faults.proxy import DelayProxy, parse_address


class EchoServer:
    """Echoes every byte back; records what each connection saw before it closed."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(128)
        self.port = self.sock.getsockname()[1]
        self.closed_connections = 0
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._echo, args=(conn,), daemon=True).start()

    def _echo(self, conn):
        with conn, contextlib.suppress(OSError):
            while data := conn.recv(65536):
                conn.sendall(data)
        with self.lock:
            self.closed_connections += 1

    def close(self):
        self.sock.close()


class RunningProxy:
    """A DelayProxy on its own event loop in a background thread."""

    def __init__(self, target_port: int, delay_ms: float):
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.proxy = DelayProxy(("127.0.0.1", 0), ("127.0.0.1", target_port), delay_ms)
        asyncio.run_coroutine_threadsafe(self.proxy.start(), self.loop).result(10)
        self.port = self.proxy.port

    def open_pairs(self) -> int:
        return asyncio.run_coroutine_threadsafe(asyncio.sleep(0, len(self.proxy.pairs)), self.loop).result(10)

    def close(self):
        asyncio.run_coroutine_threadsafe(self.proxy.stop(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


@pytest.fixture
def echo():
    server = EchoServer()
    yield server
    server.close()


@pytest.fixture
def start_proxy():
    started = []

    def start(target_port, delay_ms):
        running = RunningProxy(target_port, delay_ms)
        started.append(running)
        return running

    yield start
    for running in started:
        running.close()


def _recv_exactly(sock: socket.socket, size: int) -> bytes:
    chunks, got = [], 0
    while got < size:
        chunk = sock.recv(min(65536, size - got))
        if not chunk:
            break
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def _round_trips(port: int, count: int, size: int = 100) -> list[float]:
    """Seconds from sending a request to having its whole echo back, `count` times on one connection."""
    times = []
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for i in range(count):
            payload = bytes([i % 256]) * size
            sent = time.monotonic()
            sock.sendall(payload)
            assert _recv_exactly(sock, size) == payload
            times.append(time.monotonic() - sent)
    return times


@pytest.mark.parametrize("delay_ms", [0, 5])
def test_many_concurrent_connections_pass_every_byte_unchanged_and_in_order(echo, start_proxy, delay_ms):
    running = start_proxy(echo.port, delay_ms)

    def one_connection(seed: int) -> bool:
        data = os.urandom(64 * 1024) + bytes([seed]) * 1000
        received = bytearray()
        with socket.create_connection(("127.0.0.1", running.port), timeout=20) as sock:
            reader = threading.Thread(target=lambda: received.extend(_recv_exactly(sock, len(data))))
            reader.start()
            for start in range(0, len(data), 997):  # odd chunk sizes, so chunks never line up with reads
                sock.sendall(data[start:start + 997])
            reader.join(30)
        return bytes(received) == data

    with ThreadPoolExecutor(max_workers=40) as pool:
        results = list(pool.map(one_connection, range(40)))
    assert results == [True] * 40


def test_client_to_target_bytes_are_delayed_by_at_least_the_delay(echo, start_proxy):
    direct = _round_trips(echo.port, 20)
    plain = start_proxy(echo.port, 0)
    delayed = start_proxy(echo.port, 50)
    through_plain = _round_trips(plain.port, 20)
    through_delayed = _round_trips(delayed.port, 20)

    # The delay is a floor for every single round trip (a timer never fires early)...
    assert min(through_delayed) >= 0.050 * 0.99
    # ...and the undelayed proxy adds little compared with it: what is measured is the injected delay.
    added = statistics.median(through_delayed) - statistics.median(through_plain)
    assert added >= 0.050 * 0.99
    assert statistics.median(through_plain) < 0.5 * added
    assert statistics.median(direct) < 0.5 * added


def test_a_client_closing_closes_the_target_side_and_nothing_is_left_open(echo, start_proxy):
    running = start_proxy(echo.port, 20)
    with socket.create_connection(("127.0.0.1", running.port), timeout=10) as sock:
        sock.sendall(b"last words")
        sock.shutdown(socket.SHUT_WR)  # EOF while the bytes are still held by the delay
        assert _recv_exactly(sock, 10) == b"last words"  # delivered before the target side was closed
        assert sock.recv(10) == b""  # then the proxy closed the client side too
    deadline = time.monotonic() + 10
    while (echo.closed_connections < 1 or running.open_pairs()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert echo.closed_connections == 1
    assert running.open_pairs() == 0


def test_the_target_closing_closes_the_client_side(start_proxy):
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        running = start_proxy(server.getsockname()[1], 10)
        with socket.create_connection(("127.0.0.1", running.port), timeout=10) as sock:
            conn, _ = server.accept()
            conn.sendall(b"bye")
            conn.close()
            assert _recv_exactly(sock, 3) == b"bye"
            assert sock.recv(10) == b""


def test_a_refused_target_closes_the_client(start_proxy):
    running = start_proxy(process.free_port(), 0)  # nothing listens there
    with socket.create_connection(("127.0.0.1", running.port), timeout=10) as sock:
        try:
            data = sock.recv(10)
        except ConnectionResetError:
            data = b""  # an abort is as good as a close here
        assert data == b""


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="delay-ms"):
        DelayProxy(("127.0.0.1", 0), ("127.0.0.1", 1), -1)
    with pytest.raises(ValueError, match="delay-ms"):
        DelayProxy(("127.0.0.1", 0), ("127.0.0.1", 1), float("nan"))
    assert parse_address("9092") == ("127.0.0.1", 9092)
    assert parse_address("localhost:9092") == ("localhost", 9092)
    with pytest.raises(ValueError, match="not PORT"):
        parse_address("host:port")
    with pytest.raises(SystemExit):
        delay_proxy.main(["--listen", "1", "--target", "2", "--delay-ms", "-5"])


def test_proxy_process_is_ours_serves_and_stops(echo, tmp_path):
    mark = process.proxy_marker(tmp_path, 2)
    port = process.free_port()
    pid, started = delay_proxy.start(port, f"127.0.0.1:{echo.port}", 30, mark, tmp_path, tmp_path / "proxy.log",
                                     tie_to_parent=True)  # dies with the test process, even a killed one
    try:
        assert process.is_ours(pid, started, mark)
        assert not process.is_ours(pid, started, process.marker(tmp_path, 2))  # not the broker's marker
        assert min(_round_trips(port, 3)) >= 0.030 * 0.99
    finally:
        process.stop(pid, started, mark, timeout=10)
    assert not process.is_ours(pid, started, mark)
    assert "client->broker delay 30 ms" in (tmp_path / "proxy.log").read_text()
    assert "stopped after" in (tmp_path / "proxy.log").read_text()  # SIGTERM is a clean stop


def test_a_stray_proxy_process_is_found_by_the_directory_sweep(echo, tmp_path):
    port = process.free_port()
    pid, _ = delay_proxy.start(port, f"127.0.0.1:{echo.port}", 0, process.proxy_marker(tmp_path, 1), tmp_path,
                               tmp_path / "proxy.log", tie_to_parent=True)
    assert process.kill_marked(f"{tmp_path.resolve()}#") == [pid]
