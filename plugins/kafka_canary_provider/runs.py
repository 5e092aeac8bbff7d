"""Where a DAG run's rollout lives, and the rollout spec a DAG run asks for.

An Airflow run id (`manual__2026-11-21T07:52:55+00:00`) becomes the rollout's run id by replacing every
character the spec does not allow with `_`, so each task of one DAG run opens the same run directory,
`$KAFKA_CANARY_RUNS/<run id>`, and a retried task finds the state its earlier try left.
"""

from __future__ import annotations

import re
from pathlib import Path

from canary.rollout.core.run import runs_root

_NOT_ALLOWED = re.compile(r"[^A-Za-z0-9._-]")


def rollout_run_id(airflow_run_id: str) -> str:
    """The spec's run id for an Airflow run id: [A-Za-z0-9._-], starting with a letter or digit, ≤ 100."""
    cleaned = _NOT_ALLOWED.sub("_", airflow_run_id)
    if not cleaned[:1].isalnum():
        cleaned = "r" + cleaned
    return cleaned[:100]


def run_dir(run_id: str) -> Path:
    return runs_root() / run_id


# Every trigger-form param the DAG has, and the extra ones spec_from_params reads (from a run's conf).
KNOWN_PARAMS = frozenset({
    "cluster_conn_id", "target_version", "config_overrides", "canary_count", "canary_brokers", "window",
    "interim_interval", "probe_rate", "preflight_probe", "judge_config", "engine", "finalize", "on_inconclusive",
    "client_delay_ms", "lead_topics", "warm_up_timeout", "guard_timeout"})


def spec_from_params(params: dict, cluster: dict, run_id: str) -> dict:
    """The rollout spec (canary.rollout.spec format) for the DAG's trigger-form params and the cluster section
    built by KafkaCanaryHook. Empty values mean "not set" (a form cannot send null for every type). Raises
    ValueError for a param it does not know: Airflow passes any key of a run's conf through, and a misspelt one
    would otherwise leave its default in place without a word."""
    unknown = sorted(set(params) - KNOWN_PARAMS)
    if unknown:
        raise ValueError(f"unknown trigger params {unknown} in the run's conf; nothing was changed. Known params: "
                         f"{', '.join(sorted(KNOWN_PARAMS))}")
    change: dict = {}
    if params.get("target_version"):
        change["version"] = params["target_version"]
    if params.get("config_overrides"):
        change["config"] = dict(params["config_overrides"])
    brokers = params.get("canary_brokers") or []
    canary = {"brokers": list(brokers)} if brokers else {"count": params.get("canary_count", 1)}
    probe = {k: params[p] for k, p in (("window", "window"), ("interim_interval", "interim_interval"),
                                        ("rate", "probe_rate"), ("preflight", "preflight_probe"))
             if params.get(p) not in (None, "")}
    judge: dict = {"engine": params.get("engine") or "spark"}
    if params.get("judge_config"):
        judge["config"] = dict(params["judge_config"])
    spec = {"cluster": cluster, "change": change, "canary": canary, "probe": probe, "judge": judge,
            "finalize": bool(params.get("finalize", True)), "run_id": run_id}
    if params.get("lead_topics"):
        spec["lead_topics"] = list(params["lead_topics"])
    if params.get("client_delay_ms"):
        spec["fault"] = {"client_delay_ms": params["client_delay_ms"]}
    timeouts = {k: params[p] for k, p in (("warm_up", "warm_up_timeout"), ("guard", "guard_timeout"))
                if params.get(p) not in (None, "")}
    if timeouts:
        spec["timeouts"] = timeouts
    return spec


# The client rollout DAG's trigger-form params (kafka_client_canary).
CLIENT_PARAMS = frozenset({
    "cluster_conn_id", "service_name", "topic", "group", "fleet_dir", "producers", "consumers", "rate",
    "observation_id", "from_version", "to_version", "canary_partitions", "window", "interim_interval",
    "judge_config", "engine", "on_inconclusive", "stop_timeout", "drain_timeout", "lane_timeout"})


def client_spec_from_params(params: dict, cluster: dict, run_id: str) -> dict:
    """The client rollout spec (canary.rollout.client_spec format) for the client DAG's params; as
    `spec_from_params`, empty values are "not set" and an unknown param is refused."""
    unknown = sorted(set(params) - CLIENT_PARAMS)
    if unknown:
        raise ValueError(f"unknown trigger params {unknown} in the run's conf; nothing was changed. Known params: "
                         f"{', '.join(sorted(CLIENT_PARAMS))}")

    def given(*pairs: tuple[str, str]) -> dict:
        return {key: params[param] for key, param in pairs if params.get(param) not in (None, "")}

    judge = given(("engine", "engine"))
    if params.get("judge_config"):
        judge["config"] = dict(params["judge_config"])
    return {"cluster": cluster, "run_id": run_id,
            "service": given(("name", "service_name"), ("topic", "topic"), ("group", "group"), ("dir", "fleet_dir"),
                             ("producers", "producers"), ("consumers", "consumers"), ("rate", "rate"),
                             ("observation_id", "observation_id")),
            "change": given(("from", "from_version"), ("to", "to_version")),
            "lane": given(("partitions", "canary_partitions")),
            "window": given(("duration", "window"), ("interim_interval", "interim_interval")),
            "judge": judge,
            "timeouts": given(("stop", "stop_timeout"), ("drain", "drain_timeout"), ("lane", "lane_timeout"))}
