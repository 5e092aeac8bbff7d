"""The embedded local Kafka cluster: distributions, node configs, security files, the cluster's state."""
