"""Gated rollouts: the rollout core (`core`: the step contract, kinds, run state, audit log, lock, engine) and its
kinds — `broker` (a version or config on canary brokers), `client` (a service's new version on canary instances) and
`migration` (a consumer service moving to the KIP-848 group protocol). The CLI and the Airflow operators take a kind
and a step name."""
