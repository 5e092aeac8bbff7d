"""The broker rollout engine (DESIGN.md §3): preflight, deploy canary, learner warm-up, lead, probe and gate,
promote or rollback, verify. A library with no Airflow import; `kafka-canary rollout …` and the Airflow
operators both call the step functions in canary.rollout.steps."""
