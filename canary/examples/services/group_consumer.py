"""The sample subscribed consumer: the service the KIP-848 migration canary runs when the spec names no command of
the team's own. It reads only the contract in its environment (docs/migration-canary.md), subscribes to the topic
in the group with the group.protocol it is given, and processes every record (~1 ms of work, whatever the record
holds) through GroupMember, which logs its rebalance callbacks and observes each record. Every processed record is
logged to $KAFKA_CANARY_RECORDS: {"partition", "offset"}. SIGTERM: finish the record at hand, commit, leave.
"""

from __future__ import annotations

import json
import os
import sys
import time

from canary.clients.deployer import CONTRACT
from canary.clients.member import GroupMember
from canary.examples.services.common import setup_logging, stop_on_sigterm


def main() -> int:
    name = os.environ[CONTRACT["id"]]
    log = setup_logging(name)
    stop = stop_on_sigterm()
    member = GroupMember.from_contract()
    member.subscribe()
    log.info("group consumer %s on %s in group %s, group.protocol=%s", name, member.topics,
             member.config["group.id"], member.config["group.protocol"])
    with open(os.environ[CONTRACT["records"]], "a", buffering=1) as records:
        try:
            for msg in member.messages(stop):
                with member.processing(msg):
                    time.sleep(0.001)
                records.write(json.dumps({"partition": msg.partition(), "offset": msg.offset()}) + "\n")
        finally:
            member.close()
    log.info("group consumer %s stopped after %d records", name, member.processed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
