"""The sample consumer service: processes orders with a LaneConsumer (its lane's partitions, from the group's
committed offsets), observations on.

Processing parses the order (a malformed record is a processing error) and does ~1 ms of work. Version v2-bad is
slow (~20 ms per record) and fails 5 % of the orders. Every record processed, failed or not, is logged to
--records: {"topic", "partition", "offset", "key", "id", "ok", "malformed"}, so a test can check at-least-once
across lanes. SIGTERM: finish the record at hand, commit, close.
"""

from __future__ import annotations

import json
import sys
import time
import zlib

from canary.clients import LaneConsumer
from canary.examples.services.common import BAD, RecordsLog, client_settings, parser, setup_logging, stop_on_sigterm
from canary.kafka.clients import QUIET_LOGGER

FAILURE_SHARE = 0.05


class OrderRejected(Exception):
    pass


def main(argv: list[str] | None = None) -> int:
    p = parser("consumer")
    p.add_argument("--group", required=True)
    p.add_argument("--instance", type=int, default=0, help="this instance's ordinal in its lane")
    p.add_argument("--instances", type=int, default=1, help="instances in its lane")
    args = p.parse_args(argv)
    log = setup_logging(args.id)
    stop = stop_on_sigterm()
    records = RecordsLog(args.records)
    bad = args.version == BAD
    consumer = LaneConsumer({**client_settings(args), "group.id": args.group, "client.id": args.id,
                             "group.instance.id": args.id, "auto.offset.reset": "earliest",
                             "logger": QUIET_LOGGER}, [args.topic], lane=args.lane, instance=args.instance,
                            instances=args.instances, refresh_interval=args.refresh_interval, observations=True)
    log.info("consumer %s (%s, %s lane, instance %d of %d) reading %s", args.id, args.version, args.lane,
             args.instance, args.instances, args.topic)

    def handle(msg) -> None:
        order_id = dict(msg.headers() or []).get("order-id", b"").decode()
        key = (msg.key() or b"").decode(errors="replace")
        entry = {"topic": msg.topic(), "partition": msg.partition(), "offset": msg.offset(), "key": key,
                 "id": order_id}
        try:
            try:
                order = json.loads(msg.value())
            except ValueError as exc:
                entry["malformed"] = True
                raise OrderRejected(f"malformed order {order_id}") from exc
            time.sleep(0.02 if bad else 0.001)
            if bad and zlib.crc32(b"fail:" + order["order_id"].encode()) % 10_000 < FAILURE_SHARE * 10_000:
                raise OrderRejected(f"order {order_id}: v2-bad cannot price it")
        except Exception:
            records.write(**entry, ok=False)
            raise
        records.write(**entry, ok=True)

    try:
        handled = consumer.process(handle, stop=stop)
    finally:
        consumer.close()
        records.close()
    log.info("consumer %s stopped after %d records", args.id, handled)
    return 0


if __name__ == "__main__":
    sys.exit(main())
