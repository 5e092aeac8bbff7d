"""billing: a consumer service as a service team writes it, not one of kafka-canary's samples: it bills every order
it reads (parses the JSON, takes a millisecond) and logs what it billed. It knows nothing of kafka-canary's sample
options; it reads only the environment every instance of a client rollout is given (docs/clients.md), and keeps to
its lane with LaneConsumer. Version "2.0-broken" fails one order in ten. SIGTERM: finish the order at hand, close
(committing), exit."""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time

from canary.clients import LaneConsumer


def main() -> int:
    env = os.environ
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with open(env["KAFKA_CANARY_CLIENT_CONFIG"]) as f:
        client = json.load(f)
    name, version = env["KAFKA_CANARY_INSTANCE_ID"], env["KAFKA_CANARY_VERSION"]
    consumer = LaneConsumer({**client, "bootstrap.servers": env["KAFKA_CANARY_BOOTSTRAP"],
                             "group.id": env["KAFKA_CANARY_GROUP"], "client.id": name, "group.instance.id": name,
                             "auto.offset.reset": "earliest"}, [env["KAFKA_CANARY_TOPIC"]],
                            instance=int(env["KAFKA_CANARY_INSTANCE"]), instances=int(env["KAFKA_CANARY_INSTANCES"]),
                            observations=True)
    print(f"billing {version} as {name} in the {env['KAFKA_CANARY_LANE']} lane", flush=True)
    with open(env["KAFKA_CANARY_RECORDS"], "a") as billed:

        def bill(msg) -> None:
            order = json.loads(msg.value())
            time.sleep(0.001)
            if version == "2.0-broken" and order["n"] % 10 == 0:
                raise ValueError(f"cannot bill order {order['n']}")
            billed.write(json.dumps({"partition": msg.partition(), "offset": msg.offset(), "id": order["id"]}) + "\n")
            billed.flush()

        try:
            consumer.process(bill, stop=stop)
        finally:
            consumer.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
