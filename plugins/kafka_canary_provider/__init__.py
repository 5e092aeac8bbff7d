"""Airflow integration of kafka-canary, shaped like an official provider: hooks/, operators/, triggers/,
the report link and the plugin that serves the run reports. Everything here is a thin shell over `canary`."""
