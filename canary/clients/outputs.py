"""What a service wrote while it processed a record: LaneConsumer.processing() opens a count, LaneProducer.produce()
adds to the open count of its thread's context, and the record's observation carries it (`outputs`). A consume-
transform-produce service that processes a record and writes nothing for it dropped it silently; the judge compares
how often each lane does (`dropped_rate`, canary/judge/config.py). A service that writes outside processing()
(another thread, after the commit) is not counted: its observations say nothing about outputs."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar

_open: ContextVar[list[int] | None] = ContextVar("kafka_canary_outputs", default=None)


@contextlib.contextmanager
def counting() -> Iterator[list[int]]:
    """A count of the records produced in this context until it closes (one element: the count)."""
    box = [0]
    token = _open.set(box)
    try:
        yield box
    finally:
        _open.reset(token)


def produced() -> None:
    """One record produced: counted by the processing it belongs to, if any."""
    box = _open.get()
    if box is not None:
        box[0] += 1
