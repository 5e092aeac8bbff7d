"""Deployers put a broker on a version and config. The rollout steps only talk to the `Deployer` interface (`base`);
the spec's cluster section (canary.rollout.core.spec.ClusterSection) opens the one it names: `local` drives the
embedded cluster of JVMs, `docker` containers on a Docker engine, `command` any fleet through shell command templates
(systemd over SSH, Ansible, a platform team's own tooling). Import each name from the module that defines it."""
