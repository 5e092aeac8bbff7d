"""The KIP-848 migration canary: a consumer service moves from the classic group protocol to
`group.protocol=consumer`, canary instances first (docs/migration-canary.md).

    result = run_migration(MigrationSpec(bootstrap_servers=servers, topic="orders", group="billing",
                                         out_dir=Path("runs/billing")))
    Brief.of(result).verdict  # PROMOTE / ROLLBACK / INCONCLUSIVE (canary.judge.Brief); result.json in out_dir

Steps: **preflight** (reads only: finalized group.version >= 1, the brokers accept the consumer protocol and let a
group migrate, the topic exists with a partition per instance, the group has no member that is not ours) →
**window** (every instance subscribes to the topic in ONE group: baseline instances on `classic`, canary instances,
marked by `canary.lanes.canary_client_id`, on `consumer`; a producer writes steady traffic; one baseline instance
restarts, so both protocols have a rebalance to handle) → **judge** (lag and processing time through the judge,
rebalance disruption by canary.clients.rebalance.compare) → **promote** (baseline instances switch to `consumer`
one at a time, each closing cleanly and committing) or **rollback** (canary instances back to `classic`) →
**verify** (every instance on the promised protocol, the group stable, every produced record consumed at least once).

The instances are processes of the service's own consumer (the spec's `command`, any language, given the instance
contract of canary.clients.deployer, `group.protocol` included; by default the sample subscribed consumer), children
of this process so none outlives the run. A Python service reports its rebalance callbacks and processed records
through canary.clients.member.GroupMember; the callbacks carry wall-clock times of this one host.

It is a kind of the rollout core (MIGRATION): a run has run.json, audit.jsonl, report.html and the cluster lock,
in the out_dir beside result.json, verdict.json, events.jsonl and observations.jsonl. Since the instances live in
this process, its steps run only together, through the engine (see `kind`).

Modules, one job each: `spec` (MigrationSpec, its loader, errors), `group` (the topic's partitions, the group as
the coordinator sees it), `preflight`, `fleet` (the instances as processes, their
callbacks, settling), `traffic` (synthetic records, only when asked), `verdict` (disruption and the judge,
combined), `actions` (promote, rollback, verify), `session` (MigrationSession: the instances of one run), `run`
(MigrationRun: the core's run with the session and result.json), `steps` (the step functions), `kind` (MIGRATION,
run_migration), `cli` (`kafka-canary migrate-protocol`).
"""

from canary.rollout.migration.actions import promote, rollback, verify
from canary.rollout.migration.group import describe_group, topic_partitions
from canary.rollout.migration.kind import MIGRATION, run_migration
from canary.rollout.migration.preflight import preflight
from canary.rollout.migration.run import MigrationRun
from canary.rollout.migration.spec import (
    Action,
    MigrationError,
    MigrationRefused,
    MigrationSpec,
    Protocol,
    load_migration_spec,
)
from canary.rollout.migration.verdict import judge_config, judge_observations

__all__ = ["MIGRATION", "Action", "MigrationError", "MigrationRefused", "MigrationRun", "MigrationSpec", "Protocol",
           "describe_group", "judge_config", "judge_observations", "load_migration_spec", "preflight", "promote",
           "rollback", "run_migration", "topic_partitions", "verify"]
