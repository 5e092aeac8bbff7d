"""The probe message on the wire: a JSON value with the Strimzi fields `producerId`, `messageId`,
`timestamp` (ms), plus what sequence tracking needs: `epoch` (random per probe process, so a
restarted probe never mistakes its predecessor's messages for its own), `seq` (per producer and
partition, from 0), `partition`, `leader` and `lane` at send time, `runId`, and `pad` filling the
value up to the configured size. Key is null; the probe picks the partition."""

from __future__ import annotations

import json
from dataclasses import dataclass


class MalformedMessage(ValueError):
    """A record on the canary topic that is not a probe message."""


@dataclass(frozen=True)
class ProbeMessage:
    producer_id: str
    epoch: str
    run_id: str
    partition: int
    seq: int
    timestamp: int        # ms since the epoch, at send
    leader: int | None
    lane: str

    @property
    def message_id(self) -> str:
        return f"{self.epoch}-{self.partition}-{self.seq}"

    def encode(self, size: int = 0) -> bytes:
        body = {"producerId": self.producer_id, "messageId": self.message_id, "timestamp": self.timestamp,
                "epoch": self.epoch, "runId": self.run_id, "partition": self.partition, "seq": self.seq,
                "leader": self.leader, "lane": self.lane}
        raw = json.dumps(body, separators=(",", ":"))
        missing = size - len(raw) - len(',"pad":""')
        if missing > 0:
            raw = raw[:-1] + ',"pad":"' + "x" * missing + '"}'
        return raw.encode()


def decode(raw: bytes | None) -> ProbeMessage:
    """Parses one record value; raises MalformedMessage saying what is wrong."""
    if raw is None:
        raise MalformedMessage("record has no value")
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise MalformedMessage(f"value is not JSON: {exc}") from exc
    if not isinstance(body, dict):
        raise MalformedMessage("value is not a JSON object")
    try:
        msg = ProbeMessage(producer_id=str(body["producerId"]), epoch=str(body.get("epoch", "")),
                           run_id=str(body.get("runId", "")), partition=int(body.get("partition", -1)),
                           seq=int(body.get("seq", -1)), timestamp=int(body["timestamp"]),
                           leader=body.get("leader"), lane=str(body.get("lane", "baseline")))
    except (KeyError, TypeError, ValueError) as exc:
        raise MalformedMessage(f"value lacks or mistypes a probe field: {exc}") from exc
    return msg
