"""Feature levels (KIP-584, KIP-778 for KRaft): read them, and finalize the levels of a release.

Finalizing raises only the levels asked for. `kafka-features upgrade --release-version` also
raises every other feature the release maps, `kraft.version` among them (which changes the
controller quorum's record format for good), so the default here leaves `kraft.version` alone.
Finalized levels only go up: a lower level is refused, never sent.
"""

from __future__ import annotations

from dataclasses import dataclass

from kafka.admin import KafkaAdminClient
from kafka.errors import KafkaError

from canary.errors import FeatureError
from canary.kafka.wait import WaitTimeout, wait_until

# Never raised unless named explicitly: irreversible, and not needed by a broker upgrade.
NOT_BY_DEFAULT = frozenset({"kraft.version"})


@dataclass(frozen=True)
class FeatureLevels:
    finalized: dict[str, int]  # feature -> finalized max level
    supported: dict[str, tuple[int, int]]  # feature -> (min, max) the answering broker supports
    epoch: int | None

    def to_dict(self) -> dict:
        return {"finalized": self.finalized, "supported": {k: list(v) for k, v in self.supported.items()},
                "epoch": self.epoch}


def _admin(bootstrap_servers: str, client_config: dict | None = None) -> KafkaAdminClient:
    try:
        return KafkaAdminClient(bootstrap_servers=bootstrap_servers, request_timeout_ms=30000,
                                client_id="kafka-canary-features", **(client_config or {}))
    except KafkaError as exc:
        raise FeatureError(f"cannot reach {bootstrap_servers} to read feature levels: {exc}") from exc


def describe(bootstrap_servers: str, client_config: dict | None = None) -> FeatureLevels:
    """The cluster's finalized levels and the supported ranges, as the active controller reports them."""
    admin = _admin(bootstrap_servers, client_config)
    try:
        raw = admin.describe_features(send_request_to_controller=True)
    except KafkaError as exc:
        raise FeatureError(f"describing features on {bootstrap_servers} failed: {exc}") from exc
    finally:
        admin.close()
    finalized = {name: info["finalized"][1] for name, info in raw.items() if "finalized" in info}
    supported = {name: tuple(info["supported"]) for name, info in raw.items() if "supported" in info}
    epochs = [info["finalized_epoch"] for info in raw.values() if info.get("finalized_epoch") is not None]
    return FeatureLevels(finalized, supported, max(epochs) if epochs else None)


def plan(current: FeatureLevels, wanted: dict[str, int]) -> dict[str, tuple[int, int]]:
    """The changes that finalizing `wanted` makes: feature -> (current level, new level).

    Levels already reached are skipped (harmless repeat). A lower level, or one outside what
    the cluster supports, raises FeatureError before anything is sent.
    """
    changes = {}
    for name, level in sorted(wanted.items()):
        now = current.finalized.get(name, 0)
        if level < now:
            raise FeatureError(f"{name} is finalized at {now}; finalized levels only go up, refusing {level}")
        if level == now:
            continue
        low, high = current.supported.get(name, (0, 0))
        if not low <= level <= high:
            raise FeatureError(f"{name}={level} is outside the supported range {low}-{high}; upgrade every "
                               f"broker and controller to a release that supports it first")
        changes[name] = (now, level)
    return changes


def finalize(bootstrap_servers: str, wanted: dict[str, int], dry_run: bool = False,
             client_config: dict | None = None) -> dict[str, tuple[int, int]]:
    """Raises the finalized levels in `wanted`, only those; returns what changed (or would).

    The controller validates first (validate-only request), so a level some node does not
    support fails with nothing changed.
    """
    changes = plan(describe(bootstrap_servers, client_config), wanted)
    if not changes:
        return {}
    updates = {name: new for name, (_, new) in changes.items()}
    admin = _admin(bootstrap_servers, client_config)
    try:
        for validate_only in (True,) if dry_run else (True, False):
            result = admin.update_features(updates, validate_only=validate_only)
            failed = {name: msg for name, msg in result.items() if msg != "OK"}
            if failed:
                raise FeatureError(f"the controller refused to finalize {failed}; nothing was changed"
                                   if validate_only else f"finalizing failed for {failed}")
    except KafkaError as exc:
        raise FeatureError(f"finalizing {updates} failed: {exc}") from exc
    finally:
        admin.close()
    if not dry_run:
        _await_levels(bootstrap_servers, updates, client_config)
    return changes


def _await_levels(bootstrap_servers: str, levels: dict[str, int], client_config: dict | None,
                  timeout: float = 15.0) -> None:
    """The controller accepted the levels; a broker answers with them once the metadata reached it, a moment later.
    Callers read the levels right away (verify, the next finalize), so this returns only once they show."""
    missing = f"finalized levels {levels} not shown yet"
    try:
        wait_until("finalized feature levels", timeout, lambda: None if all(
            describe(bootstrap_servers, client_config).finalized.get(name, 0) >= level
            for name, level in levels.items()) else missing, poll=0.2)
    except WaitTimeout as exc:
        raise FeatureError(f"{exc}; the controller accepted them, so they will show once the metadata reaches the "
                           f"brokers") from None
