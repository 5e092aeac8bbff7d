"""A delaying TCP proxy: put it in front of a broker's client listener to make that broker slow.

    python -m canary.faults.proxy --listen 127.0.0.1:19092 --target 127.0.0.1:9092 --delay-ms 50

Direction: every byte a client sends (client → broker) is held for `--delay-ms` before it is
forwarded; bytes from the broker to the client pass at once. A Kafka request therefore reaches
the broker `delay` later and its response comes back `delay` later than without the proxy: a
produce's acknowledgement latency grows by the delay, and a fetch is answered up to the delay
later. Only connections through the proxy are slowed; the local cluster keeps replication on a
separate listener, so followers never see the delay.

Bytes of one connection keep their order in both directions (one FIFO queue per connection,
drained by a single timer); with `--delay-ms 0` bytes are forwarded as they arrive. When either
side closes, what is still queued towards the other side is delivered, then both are closed;
a reset on one side aborts the other. Many connections run concurrently on one asyncio loop.

The local cluster starts one proxy per delayed broker as its own process (`start`), with the
node marker on its command line, so only our own processes are ever signalled.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import logging
import math
import os
import signal
import sys
from pathlib import Path
from typing import cast

from canary import process

log = logging.getLogger("canary.faults.proxy")

# Flow control: stop reading from one side while the other side's socket has this much unsent.
_HIGH_WATER = 1024 * 1024
_LOW_WATER = 256 * 1024


def parse_address(text: str, default_host: str = "127.0.0.1") -> tuple[str, int]:
    """'HOST:PORT' or 'PORT' -> (host, port); ValueError with a readable message otherwise."""
    host, sep, port = text.rpartition(":")
    if not sep:
        host, port = default_host, text
    if not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"{text!r} is not PORT or HOST:PORT")
    return host or default_host, int(port)


class _Side(asyncio.Protocol):
    """One socket of a proxied connection. Bytes it receives go to `peer` after `delay` seconds."""

    peer: _Side  # the other side of the pair, set by _Pair as soon as both exist

    def __init__(self, pair: _Pair, delay: float):
        self.pair = pair
        self.delay = delay
        self.transport: asyncio.Transport | None = None
        self.queue: collections.deque[tuple[float, bytes]] = collections.deque()
        self.timer: asyncio.TimerHandle | None = None
        self.eof = False  # this side has sent EOF (or is gone): forward it once the queue is drained
        self.eof_forwarded = False
        self.closed = False

    # ----- asyncio callbacks -----

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A stream protocol's transport (a TCP socket) is a Transport; the callback's signature names the base.
        self.transport = cast(asyncio.Transport, transport)
        self.transport.set_write_buffer_limits(_HIGH_WATER, _LOW_WATER)

    def data_received(self, data: bytes) -> None:
        if self.delay <= 0 and not self.queue:
            self._peer_transport().write(data)
            return
        loop = asyncio.get_running_loop()
        self.queue.append((loop.time() + self.delay, data))
        if self.timer is None:
            self.timer = loop.call_at(self.queue[0][0], self._drain)

    def eof_received(self) -> bool:
        self.eof = True
        if not self.queue:
            self._forward_eof()
        return True  # half-close: the other direction goes on until its side ends too

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if exc is not None:
            self.pair.abort()
            return
        self.eof = True
        if not self.queue:
            self._forward_eof()

    # Flow control: the peer's socket is full, so stop reading what would be written to it.
    def pause_writing(self) -> None:
        if self.peer and self.peer.transport and not self.peer.closed:
            self.peer.transport.pause_reading()

    def resume_writing(self) -> None:
        if self.peer and self.peer.transport and not self.peer.closed:
            self.peer.transport.resume_reading()

    # ----- delayed forwarding -----

    def _peer_transport(self) -> asyncio.Transport:
        """The peer's socket. Bytes arrive only once both are connected: the client side is not read until the
        target is connected, and the target side's peer is the client that connected first."""
        if self.peer.transport is None:
            raise RuntimeError("proxied bytes arrived before the peer was connected")
        return self.peer.transport

    def _drain(self) -> None:
        self.timer = None
        loop = asyncio.get_running_loop()
        now = loop.time()
        peer = self._peer_transport()
        while self.queue and self.queue[0][0] <= now:
            _, data = self.queue.popleft()
            if not self.peer.closed:
                peer.write(data)
        if self.queue:
            self.timer = loop.call_at(self.queue[0][0], self._drain)
        elif self.eof:
            self._forward_eof()

    def _forward_eof(self) -> None:
        """This side has ended and everything it sent is delivered: end the peer's write side too, and
        close the pair once both directions have ended (or this side is gone altogether)."""
        if self.eof_forwarded:
            return
        self.eof_forwarded = True
        peer = self.peer.transport
        if self.closed or self.peer.eof_forwarded or self.peer.closed or peer is None or not peer.can_write_eof():
            self.pair.close()
        else:
            peer.write_eof()

    def cancel(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        self.queue.clear()


class _Pair:
    """A client connection and its connection to the target."""

    def __init__(self, proxy: DelayProxy):
        self.proxy = proxy
        self.client = _ClientSide(self, proxy.delay)  # client -> target: delayed
        self.target = _Side(self, 0.0)  # target -> client: at once
        self.client.peer, self.target.peer = self.target, self.client
        self.connecting: asyncio.Task | None = None
        self.done = False

    def close(self) -> None:
        """Both sides closed after their buffered bytes are written (queues are already drained)."""
        self._end(abort=False)

    def abort(self) -> None:
        """Both sides dropped at once (a reset on one side)."""
        self._end(abort=True)

    def _end(self, abort: bool) -> None:
        if self.done:
            return
        self.done = True
        for side in (self.client, self.target):
            side.cancel()
            if side.transport is not None:
                side.transport.abort() if abort else side.transport.close()
        self.proxy.pairs.discard(self)


class _ClientSide(_Side):
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self.pair.proxy.pairs.add(self.pair)
        self.pair.proxy.connections_total += 1
        cast(asyncio.Transport, transport).pause_reading()  # nothing is read until the target is connected
        self.pair.connecting = asyncio.get_running_loop().create_task(self._connect())

    async def _connect(self) -> None:
        pair = self.pair
        loop = asyncio.get_running_loop()
        try:
            await loop.create_connection(lambda: pair.target, *pair.proxy.target)
        except OSError as exc:
            log.info("target %s:%s refused a connection: %s", *pair.proxy.target, exc)
            pair.abort()
            return
        if pair.done or self.closed or self.transport is None:
            pair.close()
            return
        self.transport.resume_reading()


class DelayProxy:
    """The proxy inside a running event loop: `await proxy.start()`, then `await proxy.stop()`."""

    def __init__(self, listen: tuple[str, int], target: tuple[str, int], delay_ms: float):
        if not math.isfinite(delay_ms) or delay_ms < 0:
            raise ValueError(f"--delay-ms must be a finite number >= 0, got {delay_ms}")
        self.listen = listen
        self.target = target
        self.delay = delay_ms / 1000.0
        self.pairs: set[_Pair] = set()
        self.connections_total = 0
        self.server: asyncio.Server | None = None

    @property
    def port(self) -> int:
        if self.server is None:
            raise RuntimeError("the proxy is not started")
        return self.server.sockets[0].getsockname()[1]

    async def start(self) -> None:
        self.server = await asyncio.get_running_loop().create_server(lambda: _Pair(self).client, *self.listen,
                                                                     reuse_address=True,
                                                                     backlog=512)

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()
        for pair in list(self.pairs):
            pair.close()
        if self.server is not None:
            await self.server.wait_closed()


# ----- the proxy as a process of its own -----

def command(listen_port: int, target: str, delay_ms: float, mark: str) -> list[str]:
    """The command line of a proxy process; `mark` (a node marker) makes it recognisably ours."""
    return [sys.executable, "-m", "canary.faults.proxy", "--listen", f"127.0.0.1:{listen_port}",
            "--target", target, "--delay-ms", f"{delay_ms:g}", mark]


def start(listen_port: int, target: str, delay_ms: float, mark: str, cwd: Path, log_file: Path,
          tie_to_parent: bool = False, timeout: float = 15.0) -> tuple[int, int]:
    """Starts a proxy process and waits until it accepts connections; returns (pid, start time).

    Raises RuntimeError (naming the log file) when it exits or does not listen within `timeout`.
    """
    # `python -m canary.faults.proxy` with this interpreter: it imports the same installed canary as this process.
    pid, started = process.start(command(listen_port, target, delay_ms, mark), cwd, log_file, tie_to_parent)
    if not process.wait_listening(listen_port, timeout, alive=lambda: process.is_ours(pid, started, mark)):
        process.stop(pid, started, mark, kill=True, timeout=5)
        raise RuntimeError(f"the delay proxy on port {listen_port} did not start listening; see {log_file}")
    return pid, started


async def _serve(args: argparse.Namespace) -> None:
    proxy = DelayProxy(args.listen, args.target, args.delay_ms)
    await proxy.start()
    log.warning("delay proxy: 127.0.0.1:%s -> %s:%s, client->broker delay %g ms (pid %s)",
                proxy.port, *args.target, args.delay_ms, os.getpid())
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stopping.set)
    await stopping.wait()
    await proxy.stop()
    log.warning("delay proxy stopped after %s connections", proxy.connections_total)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    argv = [a for a in argv if not a.startswith(process.MARKER)]  # the marker is for /proc, not for us
    parser = argparse.ArgumentParser(prog="python -m canary.faults.proxy", description=__doc__.split("\n\n")[0])
    parser.add_argument("--listen", required=True, type=parse_address, help="PORT or HOST:PORT to accept on")
    parser.add_argument("--target", required=True, type=parse_address, help="HOST:PORT to forward to")
    parser.add_argument("--delay-ms", type=float, default=0.0, help="delay of client->target bytes (default 0)")
    args = parser.parse_args(argv)
    if not math.isfinite(args.delay_ms) or args.delay_ms < 0:
        parser.error(f"--delay-ms must be a finite number >= 0, got {args.delay_ms}")
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(message)s")
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_serve(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
