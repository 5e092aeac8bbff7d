"""The change's config overrides checked before any broker restarts: a value the broker would refuse (`num.io.threads:
.nan`, a size below its minimum) is refused in preflight with the broker's own message, not found when the canary
does not come back. Checked against the definitions of the release the canary will run when its jars are here
(every key, static ones too), and by a running canary broker (validate-only AlterConfigs, dynamic keys only)."""

from __future__ import annotations

from canary.cluster.config_definitions import definition_check
from canary.kafka.config_validation import broker_check
from canary.rollout.core import RolloutError


def check_change_config(bootstrap_servers: str, client: dict | None, config: dict[str, str | None], version: str,
                        broker_id: int) -> dict:
    """Raises RolloutError naming every refused key with the broker's message; returns what was checked how.
    `version`: the release the canary will run. Without its jars here, broker `broker_id` (a canary, on the current
    release) checks the dynamic keys; the static ones are then listed as not checked."""
    values = {k: v for k, v in config.items() if v is not None}  # None removes an override: nothing to parse
    if not values:
        return {}
    definitions = definition_check(version, values)
    if definitions is not None:
        refused, unknown, not_checked = definitions.invalid, definitions.unknown, []
    else:
        checked = broker_check(bootstrap_servers, client, broker_id, values)
        refused, unknown, not_checked = checked.refused, [], checked.static
    if refused:
        shown = "; ".join(f"{key}: {message}" for key, message in sorted(refused.items()))
        raise RolloutError(f"change.config has values a Kafka {version} broker refuses ({shown}); fix them in the "
                           f"spec (nothing was changed)")
    return {"keys": sorted(values), "by": f"Kafka {version}'s definitions" if definitions else f"broker {broker_id}",
            "unknown_keys": unknown, "not_checked": not_checked}
