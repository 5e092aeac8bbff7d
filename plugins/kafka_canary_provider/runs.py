"""Where a DAG run's rollout lives, and the rollout spec a DAG run asks for.

An Airflow run id (`manual__2026-11-21T07:52:55+00:00`) becomes the rollout's run id by replacing every
character the spec does not allow with `_`, so each task of one DAG run opens the same run,
`$KAFKA_CANARY_RUNS/<run id>` (a directory or an object store's prefix), and a retried task finds the state its
earlier try left.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from canary.forms import BROKER_FORM, CLIENT_FORM
from canary.release import RELEASE_NOTE
from canary.rollout.core.record import Origin, Trigger
from canary.rollout.core.run import runs_url
from canary.storage import Store, open_store
from kafka_canary_provider.hooks.run_storage import run_storage_options

_NOT_ALLOWED = re.compile(r"[^A-Za-z0-9._-]")


def rollout_run_id(airflow_run_id: str) -> str:
    """The spec's run id for an Airflow run id: [A-Za-z0-9._-], starting with a letter or digit, ≤ 100."""
    cleaned = _NOT_ALLOWED.sub("_", airflow_run_id)
    if not cleaned[:1].isalnum():
        cleaned = "r" + cleaned
    return cleaned[:100]


# How Airflow's run types read as a run's trigger; a manual run is the release pipeline's when its note says so.
_TRIGGERS: dict[str, Trigger] = {"scheduled": "schedule", "asset_triggered": "asset", "asset_materialization": "asset",
                                 "backfill": "backfill"}


def airflow_origin(dag_run: Any, params: Mapping[str, Any] | None = None) -> Origin | None:
    """What started the DAG run `dag_run` (the task context's): its run type, the release pipeline's word (its
    `started_by` param; the run's note says so too where Airflow hands it to the task), the user Airflow names;
    None without a DAG run (a task run on its own)."""
    if dag_run is None:
        return None
    run_type = str(getattr(dag_run, "run_type", "") or "")
    released = (params or {}).get("started_by") == "release" or str(
        getattr(dag_run, "note", "") or "").startswith(RELEASE_NOTE)
    trigger = _TRIGGERS.get(run_type, "release" if released else "airflow")
    return Origin(trigger=trigger, by=getattr(dag_run, "triggering_user_name", None) or None,
                  dag_id=dag_run.dag_id, airflow_run_id=dag_run.run_id)


def runs_store() -> Store:
    """$KAFKA_CANARY_RUNS (a directory, or an object store every worker and the API server reach), with the
    credentials of the connection $KAFKA_CANARY_RUNS_CONN_ID names when set."""
    return open_store(runs_url(), run_storage_options())


def run_dir(run_id: str) -> Store:
    """The run's storage under $KAFKA_CANARY_RUNS."""
    return runs_store().child(run_id)


def run_file(run_id: str, recorded: object) -> object:
    """A file of the run as run.json and XCom record it (relative to the run), on this worker: in its work
    directory for the run, where the run storage brings the run's files. "", absolute paths, URLs and anything
    not a string (the window's bounds) stay as they are."""
    if not isinstance(recorded, str) or not recorded or recorded.startswith("/") or "://" in recorded:
        return recorded
    return str(run_dir(run_id).workdir() / recorded)


__all__ = ["airflow_origin", "client_spec_from_params", "rollout_run_id", "run_dir", "run_file", "runs_store",
           "runs_url", "spec_from_params"]


def spec_from_params(params: dict, cluster: dict, run_id: str) -> dict:
    """The rollout spec (canary.rollout.broker.spec format) a broker rollout DAG run's params ask for, with the cluster
    section built by KafkaCanaryHook; an unknown param (Airflow passes any key of a run's conf through) is refused
    rather than left to fall back to its default without a word."""
    return BROKER_FORM.spec(params, cluster=cluster, run_id=run_id)


def client_spec_from_params(params: dict, cluster: dict, run_id: str) -> dict:
    """The client rollout spec (canary.rollout.client.spec format) for the client DAG's params, as above."""
    return CLIENT_FORM.spec(params, cluster=cluster, run_id=run_id)
