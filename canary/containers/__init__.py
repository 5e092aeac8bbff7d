"""Kafka in containers: images built from the Maven-resolved jars (laid out like the official `apache/kafka`
image), a cluster of containers on one Docker host, and the naming both share (labels, environment)."""
