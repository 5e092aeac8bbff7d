"""Kafka plumbing, the library's bottom layer: client settings and the one secret rule, the clients' defaults, the
admin wrapper, cluster health and feature levels. Nothing here knows about probes, rollouts or Airflow."""
