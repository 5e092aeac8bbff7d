"""The client rollout (the same shape as the broker rollout): a new version of a producer/consumer
service goes first to canary instances that only touch canary partitions, the lanes are compared, and the version is
promoted to every instance or rolled back. Each step reads the real state (cluster, instances), converges, records
every action in the audit log and returns a small JSON-able result; re-running a step does only what is missing.

    from canary.rollout.client import CLIENT
    from canary.rollout.core import run_all
    rollout = CLIENT.open("client-rollout.yaml")
    run_all(CLIENT, rollout)          # or one step at a time: CLIENT.step("open-lane")(rollout), …

Order, and why:
- open-lane before deploy-canary: canary producers start only once canary partitions exist, so not one of their
  records falls back onto baseline partitions (KIP fallback is availability first; a rollout need not use it).
- promote: baseline instances to the new version one at a time, then close the lane (the canary consumers hand the
  canary partitions back at their commits), then stop the canary instances.
- rollback: canary producers stop first (a bad producer must not fall back onto baseline partitions once the lane
  closes), canary consumers drain what the canary producers wrote (committed offsets reach where the canary
  partitions ended when the producers stopped, so baseline consumers never receive a record of the bad version; a
  service without producer instances wrote nothing there, and its canary consumers stop at once), the lane closes
  (baseline consumers take the partitions over at the committed offsets), then the canary consumers stop.

Run state, audit log, report and the cluster lock are the rollout core's: one rollout per cluster, broker or client.
"""

from canary.rollout.client.kind import CLIENT
from canary.rollout.client.rollout import ClientRollout, fleet

__all__ = ["CLIENT", "ClientRollout", "fleet"]
