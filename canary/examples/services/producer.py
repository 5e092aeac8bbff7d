"""The sample producer service: keyed orders at a steady rate through a LaneProducer, observations on.

Each record is JSON `{"order_id", "customer", "amount", "version"}` keyed by customer, with the order id also in
the header `order-id` (so a malformed record can still be traced). Version v2-bad writes 5 % of its records
malformed (not JSON). Every acknowledged record is logged to --records: {"id", "key", "partition", "offset",
"malformed"}. SIGTERM: stop sending, flush, close.
"""

from __future__ import annotations

import json
import os
import random
import sys
import time
import zlib

from canary.clients import LaneProducer
from canary.examples.services.common import BAD, RecordsLog, client_settings, parser, setup_logging, stop_on_sigterm
from canary.kafka.clients import QUIET_LOGGER

MALFORMED_SHARE = 0.05


def is_malformed(order_id: str, version: str) -> bool:
    """Deterministic per order: the bad version's share of malformed records."""
    return version == BAD and zlib.crc32(order_id.encode()) % 10_000 < MALFORMED_SHARE * 10_000


def main(argv: list[str] | None = None) -> int:
    p = parser("producer")
    p.add_argument("--rate", type=float, default=20.0, help="records per second")
    args = p.parse_args(argv)
    log = setup_logging(args.id)
    stop = stop_on_sigterm()
    records = RecordsLog(args.records)
    producer = LaneProducer({**client_settings(args), "client.id": args.id, "logger": QUIET_LOGGER},
                            lane=args.lane, topics=[args.topic], refresh_interval=args.refresh_interval,
                            observations=True)
    prefix = f"{args.id}/{os.getpid()}"  # order ids stay unique across restarts of the instance
    log.info("producer %s (%s, %s lane) sending %g records/s to %s", args.id, args.version, args.lane, args.rate,
             args.topic)

    def delivered(order_id: str, key: str, malformed: bool):
        def report(err, msg) -> None:
            if err is None:
                records.write(id=order_id, key=key, partition=msg.partition(), offset=msg.offset(),
                              malformed=malformed)
        return report

    n, start = 0, time.monotonic()
    try:
        while not stop.is_set():
            order_id, key = f"{prefix}/{n}", f"customer-{n % 50}"
            malformed = is_malformed(order_id, args.version)
            value = (b"\x00not-json " + order_id.encode() if malformed else
                     json.dumps({"order_id": order_id, "customer": key, "amount": round(random.uniform(1, 500), 2),
                                 "version": args.version}).encode())
            try:
                producer.produce(args.topic, value, key=key.encode(), headers=[("order-id", order_id.encode())],
                                 on_delivery=delivered(order_id, key, malformed))
            except BufferError:
                producer.poll(0.1)
                continue
            n += 1
            producer.poll(0)
            stop.wait(max(0.0, start + n / args.rate - time.monotonic()))
    finally:
        left = producer.flush(30)
        producer.close()
        records.close()
        log.info("producer %s stopped after %d records (%d not delivered at close)", args.id, n, left)
    return 0


if __name__ == "__main__":
    sys.exit(main())
