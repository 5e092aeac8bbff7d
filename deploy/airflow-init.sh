#!/usr/bin/env bash
# One-shot set-up of the compose stack's Airflow (service airflow-init in docker-compose.yaml). Every part is
# safe to repeat, so `docker compose up` may run it on each start.
set -euo pipefail

airflow db migrate

# SimpleAuthManager takes passwords from this file and generates (and logs) one only for a user missing from it;
# writing it from AIRFLOW_ADMIN_PASSWORD keeps the password out of the logs and lets .env change it.
python - <<'PY'
import json
import os
from pathlib import Path

path = Path(os.environ["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE"])
path.parent.mkdir(parents=True, exist_ok=True)
path.write_text(json.dumps({os.environ["AIRFLOW_ADMIN_USERNAME"]: os.environ["AIRFLOW_ADMIN_PASSWORD"]}) + "\n")
path.chmod(0o600)
PY

# One slot: one rollout at a time on this cluster (dags/kafka_broker_canary.py uses the pool).
airflow pools set "${KAFKA_CANARY_POOL}" 1 "kafka-canary: one rollout at a time on the compose Kafka cluster"

# The connections come from AIRFLOW_CONN_* (docker-compose.yaml); nothing is stored for them in the database.
echo "airflow-init: database migrated, admin password file written, pool ${KAFKA_CANARY_POOL} set"
