#!/bin/sh
# Runs one of Kafka's command-line tools in this image, as the official image's bin/kafka-run-class.sh does (the
# tools' log4j config: warnings and errors to stderr). KAFKA_HEAP_OPTS sets the heap (default 256 MiB).
set -eu
class=$1
shift
exec java ${KAFKA_HEAP_OPTS:--Xmx256M} ${KAFKA_TOOLS_LOG4J_OPTS} -cp "/opt/kafka/libs/*" "$class" "$@"
