"""RunStorageHook: the object store's credentials for the run storage from an Airflow connection.

When `KAFKA_CANARY_RUNS_CONN_ID` names a connection, every task and the API server's report pages open
`$KAFKA_CANARY_RUNS` with it; unset, the store reads the usual AWS settings of the process (environment, instance
profile, ~/.aws). The connection is an Amazon-style one (conn type `aws`):

    login: the access key id           password: the secret access key
    extras: {"endpoint_url": "http://127.0.0.1:7070", "region_name": "eu-west-1", "aws_session_token": "..."}

Why not Airflow's ObjectStoragePath: the run state is written with If-Match/If-None-Match (two tries of a task
never overwrite each other's step), which it does not expose; and it needs the Amazon provider for s3:// only to
turn this connection into the same fsspec settings.
"""

from __future__ import annotations

import json
import os
from typing import Any

from airflow.sdk import BaseHook

CONN_ENV = "KAFKA_CANARY_RUNS_CONN_ID"
EXTRAS = ("endpoint_url", "region_name", "aws_session_token")


class RunStorageHook(BaseHook):
    conn_name_attr = "run_storage_conn_id"
    conn_type = "aws"
    hook_name = "kafka-canary run storage"

    def __init__(self, run_storage_conn_id: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.run_storage_conn_id = run_storage_conn_id

    def storage_options(self) -> dict[str, Any]:
        """The fsspec S3 settings (key, secret, token, endpoint_url, client_kwargs.region_name) the connection
        holds; raises ValueError naming what to fix."""
        where = f"run storage connection {self.run_storage_conn_id} ({CONN_ENV})"
        conn = self.get_connection(self.run_storage_conn_id)
        try:
            extras = json.loads(conn.extra or "{}")
        except ValueError as exc:
            raise ValueError(f"{where}: the extras are not valid JSON ({exc}); write them as a JSON object, e.g. "
                             f'{{"endpoint_url": "https://s3.example.com"}}') from None
        unknown = sorted(set(extras) - set(EXTRAS)) if isinstance(extras, dict) else None
        if unknown is None or unknown:
            raise ValueError(f"{where}: the extras may hold only {', '.join(EXTRAS)}; got "
                             f"{unknown if unknown is not None else type(extras).__name__}")
        if bool(conn.login) != bool(conn.password):
            raise ValueError(f"{where}: set both the login (access key id) and the password (secret access key), "
                             f"or neither to use the process's AWS settings")
        options: dict[str, Any] = {}
        if conn.login:
            options |= {"key": conn.login, "secret": conn.password}
        if extras.get("aws_session_token"):
            options["token"] = extras["aws_session_token"]
        if extras.get("endpoint_url"):
            options["endpoint_url"] = extras["endpoint_url"]
        if extras.get("region_name"):
            options["client_kwargs"] = {"region_name": extras["region_name"]}
        self.log.info("run storage: credentials from connection %s%s", self.run_storage_conn_id,
                      f", endpoint {options['endpoint_url']}" if "endpoint_url" in options else "")
        return options


def run_storage_options() -> dict[str, Any]:
    """The run storage's settings from the connection $KAFKA_CANARY_RUNS_CONN_ID names; {} when unset."""
    conn_id = os.environ.get(CONN_ENV)
    return RunStorageHook(conn_id).storage_options() if conn_id else {}
