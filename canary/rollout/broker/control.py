"""The control brokers of a broker rollout: baseline brokers restarted with nothing changed, right after the canary.

A broker just restarted is not one that has run for hours: its JIT has not compiled the hot paths yet, its page
cache is cold, it has just caught up as a follower. Compared with brokers that have run for days, a canary looks
worse for having been restarted at all, and a no-op change is rolled back (docs/bench.md, "No-op rollouts"). So
the canary's own broker metrics are compared with a broker as freshly restarted as itself (Kayenta's advice: a new
baseline beside the new canary), restarted in the deploy step after the canary and leading its preferred partitions
in the lead step as the canary does. In the window the probe sends to the canary's and the control's partitions
alone, so the control is the probe's baseline lane too (a restarted canary's first minute is slow on the probe's
latencies as well: a no-op rolled back on e2e p99 at the first interim look, docs/bench.md); the other baseline
brokers, untouched, are the reference of the comparison with before the change. A control broker runs the
baseline throughout: rollback has nothing to undo on it, and promotion rolls it like any other broker. A run with
control brokers gives each look between promotion waves a control of its own (canary.rollout.broker.wave_look).

`canary.control`: `auto` takes one control broker (the highest id that is not a canary) when broker metrics are on
and at least one broker would still be left untouched; `none` takes none; a list names them.
"""

from __future__ import annotations

from canary.rollout.broker.rolling import roll_broker
from canary.rollout.broker.rollout import Rollout
from canary.rollout.core import RolloutError


def choose_control(run: Rollout, ids: list[int], canaries: list[int]) -> list[int]:
    """The control brokers for a cluster of broker `ids` with `canaries` chosen; RolloutError for a list that cannot
    be honoured (before any change)."""
    asked = run.spec.canary.control
    others = [b for b in sorted(ids) if b not in canaries]
    if asked == "none":
        return []
    if asked == "auto":
        return others[-1:] if run.spec.broker_metrics.enabled and len(others) >= 2 else []
    unknown = sorted(set(asked) - set(ids))
    if unknown:
        raise RolloutError(f"canary.control: {unknown} are not brokers of this cluster; its broker ids are "
                           f"{sorted(ids)}")
    overlap = sorted(set(asked) & set(canaries))
    if overlap:
        raise RolloutError(f"canary.control: brokers {overlap} are canary brokers; a control broker runs unchanged")
    if len(others) - len(asked) < 1:
        raise RolloutError(f"canary.control: {len(asked)} control and {len(canaries)} canary broker(s) on a "
                           f"{len(ids)}-broker cluster leave no broker untouched to compare with before the change; "
                           f"choose at most {len(others) - 1} control broker(s), or none")
    return sorted(asked)


def restart_controls(run: Rollout) -> list[dict]:
    """Restarts each control broker not restarted yet in this run, nothing changed, under the guard (a retried step
    restarts only what it had not)."""
    rolled = []
    for broker_id in run.control_ids():
        if broker_id in run.state.record.control_restarted:
            continue
        result = roll_broker(run, broker_id, "control", warm=False)
        run.state.update(control_restarted=sorted({*run.state.record.control_restarted, broker_id}))
        if result is not None:
            rolled.append(result)
    return rolled
