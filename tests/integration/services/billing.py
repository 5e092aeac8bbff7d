"""billing: a consume-transform-produce service as a service team writes it, not one of kafka-canary's samples: it
bills every order it reads (parses the JSON, takes a millisecond), writes one payment per order to
`<topic>-payments` and logs what it billed. It knows nothing of kafka-canary's sample options; it reads only the
environment every instance of a client rollout is given (docs/clients.md) and keeps to its lane with LaneConsumer
and LaneProducer. Its bad versions: "2.0-drops" bills one order in a hundred without writing its payment (a silent
drop), "2.0-slow" takes 20 ms more per order, "2.0-raises" fails on one order in fifty, "2.0-crash" exits at start.
SIGTERM: finish the order at hand, close (committing), exit."""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time

from canary.clients import LaneConsumer, LaneProducer


def main() -> int:
    env = os.environ
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with open(env["KAFKA_CANARY_CONNECTION_FILE"]) as f:
        client = json.load(f) | {"bootstrap.servers": env["KAFKA_CANARY_BOOTSTRAP"]}
    name, version, topic = env["KAFKA_CANARY_INSTANCE_ID"], env["KAFKA_CANARY_VERSION"], env["KAFKA_CANARY_TOPIC"]
    if version == "2.0-crash":
        print(f"billing {version}: cannot read its configuration", file=sys.stderr)
        return 1
    consumer = LaneConsumer({**client, "group.id": env["KAFKA_CANARY_GROUP"], "client.id": name,
                             "group.instance.id": name, "auto.offset.reset": "earliest"}, [topic],
                            instance=int(env["KAFKA_CANARY_INSTANCE"]), instances=int(env["KAFKA_CANARY_INSTANCES"]),
                            observations=True)
    payments = LaneProducer({**client, "client.id": name, "acks": "all"}, observations=True)
    print(f"billing {version} as {name} in the {env['KAFKA_CANARY_LANE']} lane", flush=True)
    with open(env["KAFKA_CANARY_RECORDS"], "a") as billed:

        def bill(msg) -> None:
            order = json.loads(msg.value())
            time.sleep(0.021 if version == "2.0-slow" else 0.001)
            if version == "2.0-raises" and order["n"] % 50 == 0:
                raise ValueError(f"cannot bill order {order['id']}")
            if not (version == "2.0-drops" and order["n"] % 100 == 0):
                payments.produce(f"{topic}-payments", json.dumps({"order": order["id"]}).encode(),
                                 key=order["id"].encode())
            payments.poll(0)
            billed.write(json.dumps({"partition": msg.partition(), "offset": msg.offset(), "id": order["id"]}) + "\n")
            billed.flush()

        try:
            consumer.process(bill, stop=stop)
        finally:
            consumer.close()
            payments.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
