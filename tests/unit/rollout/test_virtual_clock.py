"""The steps' virtual clock moves for the test's own thread only: CI once saw it 16,573 s on after a wait of a few
seconds, moved by a thread an earlier test had left sleeping in a loop."""

from __future__ import annotations

import threading
import time

from .fake_cluster import VirtualClock


def test_a_thread_left_sleeping_by_another_test_neither_moves_the_clock_nor_is_frozen_by_it(monkeypatch):
    real_start = time.monotonic()
    clock = VirtualClock(monkeypatch, start=0.0)
    stop, other_saw = threading.Event(), []

    def poller() -> None:  # a client's background thread: sleeps and reads the time in a loop
        while not stop.is_set():
            other_saw.append(time.monotonic())
            time.sleep(0.001)

    thread = threading.Thread(target=poller, daemon=True)
    thread.start()
    try:
        for _ in range(50):
            time.sleep(2)  # the test's own waits pass in no real time
        while len(other_saw) < 2:  # the other thread has slept at least once while the clock was patched
            pass
    finally:
        stop.set()
        thread.join()
    assert clock.now == 100.0 and time.monotonic() == 100.0
    assert other_saw[-1] > other_saw[0] >= real_start  # the other thread ran on the real clock
