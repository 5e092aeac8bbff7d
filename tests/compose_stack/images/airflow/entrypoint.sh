#!/bin/bash
# The official image's rule: a shell or Python command runs as given, anything else is an airflow subcommand.
case "${1:-}" in
  bash|sh|python|python3|kafka-canary) exec "$@" ;;
  *) exec airflow "$@" ;;
esac
