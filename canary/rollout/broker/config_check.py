"""The change's config overrides checked before any broker restarts: a value the broker would refuse (`num.io.threads:
.nan`, a size below its minimum) is refused in preflight with the broker's own message, not found when the canary
does not come back. Checked against the definitions of the release the canary will run when its jars are here
(every key, static ones too), and by a running canary broker (validate-only AlterConfigs, dynamic keys only)."""

from __future__ import annotations

from canary.cluster.config_definitions import definition_check
from canary.rollout.core import SpecMismatch
from canary.rollout.core.admin import ClusterAdmin


def check_change_config(admin: ClusterAdmin, config: dict[str, str | None], version: str, broker_id: int,
                        same_version: bool) -> dict:
    """Raises SpecMismatch (a mistake in the spec: exit 2) naming every refused key with the broker's message;
    returns what was checked how. `version`: the release the canary will run. `broker_id`: a canary, on the current
    release; it checks the dynamic keys too when the change keeps its release (`same_version`: its check then also
    holds the conditions between keys, such as the cleaner's buffer per thread) or when the release's jars are not
    here (the static keys are then listed as not checked)."""
    values = {k: v for k, v in config.items() if v is not None}  # None removes an override: nothing to parse
    if not values:
        return {}
    definitions = definition_check(version, values)
    refused = dict(definitions.invalid) if definitions else {}
    by, not_checked = [f"Kafka {version}'s definitions"] if definitions else [], []
    if same_version or definitions is None:
        checked = admin.check_broker_config(broker_id, values)
        refused = checked.refused | refused  # the definitions' words where both refuse
        by.append(f"broker {broker_id}")
        not_checked = [] if definitions else checked.static
    if refused:
        shown = "; ".join(f"{key}: {message}" for key, message in sorted(refused.items()))
        raise SpecMismatch(f"change.config has values a Kafka {version} broker refuses ({shown}); fix them in the "
                           f"spec (nothing was changed)")
    return {"keys": sorted(values), "by": by, "unknown_keys": definitions.unknown if definitions else [],
            "not_checked": not_checked}
