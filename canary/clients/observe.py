"""Observations of the lane-aware clients (kind "client"), written by the probe's ObservationSink into the
observations topic (and/or a JSON-lines file), so the Spark analysis compares client lanes with the same
machinery as probe lanes (canary/judge/config.py: produce_latency_p99, processing_latency_p99,
processing_error_rate, lag_p99, the e2e and error rates).

One observation per record:

- produced (LaneProducer, from the delivery report): send_ts when produce() was called, ack_ts when the
  acknowledgement (or the error) arrived, outcome `delivered` or `produce_error`; message_id `<epoch>:<n>`, unique
  per producer instance; seq counts per partition.
- processed (LaneConsumer, when the caller's processing ends): send_ts is the record's timestamp (the producer's
  send time with CreateTime topics), receive_ts when poll() returned it, processing_ms how long processing took,
  lag how many records the partition held beyond it, outcome `delivered` or `processing_error`, outputs how many
  records a LaneProducer of the same thread wrote while it was processed (canary.clients.outputs); message_id
  `<topic>-<partition>@<offset>`, seq the offset, producer_id empty (the consumer does not know it).

`lane` is the **client's** lane (the instance under test), not the partition's: while a canary producer falls back
its observations stay in the canary lane, so a bad client version is never blamed on the baseline. `leader` is the
partition's leader as the client's lane view saw it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Literal

from canary.clients.view import LaneView, connection_settings
from canary.observations import OBSERVATIONS_TOPIC, Lane, Observation
from canary.probe.sink import ObservationSink, ensure_observations_topic

RUN_ID_ENV = "KAFKA_CANARY_RUN_ID"


def run_id_for(run_id: str | None) -> str:
    """The run id observations carry: the argument, else $KAFKA_CANARY_RUN_ID (set by a client rollout for the
    instances it deploys). Raises ValueError when neither is set."""
    found = run_id or os.environ.get(RUN_ID_ENV)
    if not found:
        raise ValueError(f"observations need a run id: pass run_id= or set {RUN_ID_ENV}")
    return found


def open_sink(observations: ObservationSink | Literal[True], config: Mapping[str, object], view: LaneView | None,
              timeout: float = 30.0) -> tuple[ObservationSink, bool]:
    """The sink a client writes to and whether the client owns it (closes it). True: a new sink to the observations
    topic of the client's own cluster, with its connection settings (the topic is created when missing)."""
    if isinstance(observations, ObservationSink):
        return observations, False
    settings = connection_settings(config)
    if view is not None:
        brokers = view.admin.describe_cluster(request_timeout=timeout).result(timeout=timeout + 5).nodes
        ensure_observations_topic(view.admin, OBSERVATIONS_TOPIC, len(brokers), timeout)
    servers = settings.pop("bootstrap.servers", None) or settings.pop("metadata.broker.list", None)
    return ObservationSink(str(servers), OBSERVATIONS_TOPIC, settings), True


class ClientObserver:
    """Builds the observations of one client instance and hands them to the sink (never blocks, never raises)."""

    def __init__(self, sink: ObservationSink, run_id: str, source: str, lane: Lane):
        self.sink, self.run_id, self.source, self.lane = sink, run_id, source, lane

    def produced(self, topic: str, partition: int, leader: int | None, message_id: str, seq: int, send_ts: float,
                 ack_ts: float, error: str | None) -> None:
        self.sink.emit(Observation(
            run_id=self.run_id, kind="client", source=self.source, topic=topic, partition=partition, leader=leader,
            lane=self.lane, producer_id=self.source, message_id=message_id, seq=seq, send_ts=send_ts, ack_ts=ack_ts,
            receive_ts=None, outcome="delivered" if error is None else "produce_error", error=error))

    def processed(self, topic: str, partition: int, leader: int | None, offset: int, send_ts: float, receive_ts: float,
                  processing_ms: float, lag: int | None, error: str | None, outputs: int | None = None) -> None:
        self.sink.emit(Observation(
            run_id=self.run_id, kind="client", source=self.source, topic=topic, partition=partition, leader=leader,
            lane=self.lane, producer_id="", message_id=f"{topic}-{partition}@{offset}", seq=offset, send_ts=send_ts,
            ack_ts=None, receive_ts=receive_ts, outcome="delivered" if error is None else "processing_error",
            error=error, processing_ms=round(processing_ms, 3), lag=lag, outputs=outputs))
