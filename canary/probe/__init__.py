"""The canary probe (docs/design.md): synthetic produce+consume traffic on the canary topic that says,
per partition, per leader broker and per lane, whether Kafka works as a user sees it.

Modules, one job each: `config` (settings from file/env/flags, secrets redacted), `topic`
(reconciling the canary topic), `message` (the wire format), `tracker` (sequence tracking and
outcomes), `metrics` (Prometheus), `http` (the status server), `connection` (broker connection
checks), `sink` (observations to the cluster and to files), `runner` (the loop), `cli`.
"""
