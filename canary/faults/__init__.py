"""Fault injection for scenarios and tests: make a canary broker bad on purpose (issue 5, item 10)."""
