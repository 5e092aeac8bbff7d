"""ledger: a subscribed consumer service as a service team writes it, not one of kafka-canary's samples: it books
every payment it reads (parses the JSON, adds the amount to its account, takes a millisecond) and logs what it
booked. It knows nothing of kafka-canary's sample options; it builds its consumer from the environment every
instance of a migration canary is given (docs/migration-canary.md), `group.protocol` included, and reports its
rebalances and processed records through GroupMember. SIGTERM: finish the payment at hand, commit, leave."""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from collections import Counter

from canary.clients.member import GroupMember


def main() -> int:
    env = os.environ
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with open(env["KAFKA_CANARY_CONNECTION_FILE"]) as f:
        settings = json.load(f)
    settings |= {"bootstrap.servers": env["KAFKA_CANARY_BOOTSTRAP"], "group.id": env["KAFKA_CANARY_GROUP"],
                 "client.id": env["KAFKA_CANARY_INSTANCE_ID"], "group.protocol": env["KAFKA_CANARY_GROUP_PROTOCOL"],
                 "enable.auto.offset.store": False, "auto.offset.reset": "earliest"}
    member = GroupMember(settings, [env["KAFKA_CANARY_TOPIC"]], rebalances=env["KAFKA_CANARY_REBALANCES"],
                         observations=True)
    member.subscribe()
    print(f"ledger {env['KAFKA_CANARY_VERSION']} as {settings['client.id']} on {settings['group.protocol']}",
          flush=True)
    accounts: Counter[str] = Counter()
    with open(env["KAFKA_CANARY_RECORDS"], "a", buffering=1) as booked:
        try:
            for msg in member.messages(stop):
                with member.processing(msg):
                    payment = json.loads(msg.value())
                    accounts[payment["account"]] += payment["amount"]
                    time.sleep(0.001)
                booked.write(json.dumps({"partition": msg.partition(), "offset": msg.offset()}) + "\n")
        finally:
            member.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
