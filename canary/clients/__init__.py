"""Lane-aware Kafka clients for services (docs/design.md "client library", the KIP's canary isolation): a canary
instance of a service produces only to canary partitions and consumes only canary partitions; a baseline instance
only the others. Docs: docs/clients.md.

Modules: `view` (partitions by lane from cluster metadata, following leadership), `partitioner` (the partition
rules: lane filter, key stability, fallback), `producer` (LaneProducer), `consumer` (LaneConsumer), `holds` (the
records a consumer holds for a retry), `metrics` (Prometheus), `observe` (observations into the observations topic).
"""

from canary.clients.consumer import LaneConsumer, lane_assignment
from canary.clients.metrics import ClientMetrics
from canary.clients.partitioner import LanePartitioner, PartitionChoice, candidates, keyed_partition
from canary.clients.producer import LaneProducer
from canary.clients.view import LaneSource, LaneView, TopicLanes, connection_settings

__all__ = ["ClientMetrics", "LaneConsumer", "LanePartitioner", "LaneProducer", "LaneSource", "LaneView",
           "PartitionChoice", "TopicLanes", "candidates", "connection_settings", "keyed_partition", "lane_assignment"]
