"""kafka-canary: gated canary rollouts for Apache Kafka (library; never imports Airflow)."""

__version__ = "0.1.0"
