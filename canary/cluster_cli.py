"""`kafka-canary cluster`: a KRaft cluster of our own, local JVMs (the default) or containers — start, stop, restart
and add nodes, read their metrics and feature levels, finalize (KIP-584)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

from canary.cluster import distribution
from canary.errors import CanaryError
from canary.kafka import broker_config

if TYPE_CHECKING:
    from canary.cluster.state import Role

def default_cluster_dir() -> Path:
    if os.environ.get("KAFKA_CANARY_CLUSTER_DIR"):
        return Path(os.environ["KAFKA_CANARY_CLUSTER_DIR"])
    state_home = Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state")
    return state_home / "kafka-canary" / "cluster"


def _config_changes(items: list[str] | None, allow_unset: bool = True) -> dict[str, str | None]:
    """['k=v', 'k2='] -> {'k': 'v', 'k2': None}; an empty value removes an override."""
    result: dict[str, str | None] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise CanaryError(f"--config {item!r} is not key=value")
        if not value and not allow_unset:
            raise CanaryError(f"--config {item!r} has no value")
        result[key.strip()] = value or None
    problems = broker_config.config_problems(result)  # refused here, before the cluster is touched
    if problems:
        raise CanaryError(f"--config: {'; '.join(problems)}")
    return result


def _key_values(items: list[str] | None) -> dict[str, str]:
    """['k=v'] -> {'k': 'v'}; every item needs a value."""
    return {k: v for k, v in _config_changes(items, allow_unset=False).items() if v is not None}


def _broker_versions(items: list[str] | None) -> dict[int, str]:
    result = {}
    for item in items or []:
        node, sep, version = item.partition("=")
        if not sep or not node.isdigit():
            raise CanaryError(f"--broker-version {item!r} is not ID=VERSION, e.g. 2={distribution.TARGET_VERSION}")
        result[int(node)] = version
    return result


def _feature_levels(items: list[str] | None) -> dict[str, int]:
    result = {}
    for item in items or []:
        name, sep, level = item.partition("=")
        if not sep or not level.isdigit():
            raise CanaryError(f"--feature {item!r} is not name=level, e.g. metadata.version=27")
        result[name] = int(level)
    return result


def _print(data: object, as_json: bool, text: str) -> None:
    print(json.dumps(data, indent=2) if as_json else text)


# ----- cluster -----

def cmd_cluster_up(args: argparse.Namespace) -> int:
    from canary.cluster.local import LocalCluster

    if args.runtime == "docker":
        return _docker_cluster_up(args)
    cluster = LocalCluster.up(
        args.dir, brokers=args.brokers, controllers=args.controllers, version=args.version,
        broker_versions=_broker_versions(args.broker_version), racks=args.racks.split(",") if args.racks else None,
        config=_key_values(args.config), base_port=args.base_port, timeout=args.timeout, security=args.security)
    print(f"cluster up in {cluster.directory}: bootstrap servers {cluster.bootstrap_servers}")
    if cluster.secured:
        print(f"clients: SASL_SSL, SCRAM-SHA-512 user admin; settings in {cluster.state.client_config}, the password "
              f"in {cluster.state.secrets_file} (`kafka-canary cluster client-config --show-secret` prints it)")
    return 0


def cmd_cluster_status(args: argparse.Namespace) -> int:
    from canary.cluster.local import LocalCluster

    status = LocalCluster.open(args.dir).status()
    if args.json:
        print(json.dumps(status.to_dict(), indent=2))
        return 0
    print(f"cluster {status.cluster_id} in {status.directory}")
    print(f"bootstrap servers: {status.bootstrap_servers}")
    if status.security != "plaintext":
        print(f"security: {status.security}; client settings {status.client} (the password is in "
              f"{status.secrets_file})")
    print(f"health: {status.health.reason()}")
    print(f"{'id':>5}  {'role':<10} {'version':<8} {'rack':<10} {'pid':>7}  {'port':>5}  {'state':<8}  client delay")
    for n in status.nodes:
        rack, pid = n.rack or "-", n.pid or "-"
        delay = f"{n.client_delay_ms:g} ms via proxy port {n.proxy_port} ({n.proxy})" if n.client_delay_ms else "-"
        print(f"{n.node_id:>5}  {n.role:<10} {n.version:<8} {rack:<10} {pid:>7}  {n.port:>5}  {n.state:<8}  {delay}")
    return 0


def cmd_cluster_metrics(args: argparse.Namespace) -> int:
    from canary.broker_metrics import ExporterSource, metrics_table
    from canary.cluster.local import LocalCluster

    cluster = LocalCluster.open(args.dir)
    source = ExporterSource(cluster.metrics_endpoints())
    source.check()
    source.sample()  # the first reading: rates need a second one
    time.sleep(args.interval)
    samples = source.sample()
    if args.json:
        print(json.dumps([asdict(s) for s in samples], indent=2))
    else:
        print(metrics_table(samples))
    return 0


def cmd_cluster_client_config(args: argparse.Namespace) -> int:
    from canary.cluster.local import LocalCluster

    cluster = LocalCluster.open(args.dir)
    settings = cluster.client_config(with_secret=args.show_secret)
    if args.json:
        print(json.dumps(settings, indent=2))
    else:
        print("".join(f"{k}={v}\n" for k, v in settings.items()), end="")
    if cluster.secured and not args.show_secret:
        print(f"sasl.password is not shown: it is in {cluster.state.secrets_file}; --show-secret prints it",
              file=sys.stderr)
    elif not cluster.secured:
        print("the cluster is plaintext: clients need no settings", file=sys.stderr)
    return 0


def _docker_cluster_up(args: argparse.Namespace) -> int:
    from canary.containers import engine
    from canary.containers.cluster import DockerCluster, validate_name

    unsupported = [flag for flag, given in (("--broker-version", args.broker_version), ("--racks", args.racks),
                                            ("--base-port", args.base_port),
                                            ("--security sasl_ssl", args.security != "plaintext")) if given]
    if unsupported:
        raise CanaryError(f"--runtime docker does not take {', '.join(unsupported)} yet; leave it out, or use the "
                          f"local runtime")
    cluster = DockerCluster.up(engine.connect(), validate_name(args.name), brokers=args.brokers,
                               controllers=args.controllers, version=args.version, config=_key_values(args.config),
                               timeout=args.timeout)
    print(f"cluster {cluster.name} up in containers: bootstrap servers {cluster.bootstrap_servers}; a rollout spec "
          f"names it as cluster: {{deployer: docker, docker: {{name: {cluster.name}}}}}")
    return 0


def cmd_cluster_down(args: argparse.Namespace) -> int:
    from canary.cluster.local import LocalCluster

    if args.runtime == "docker":
        from canary.containers import engine
        from canary.containers.cluster import DockerCluster, validate_name

        removed = DockerCluster.down(engine.connect(), validate_name(args.name))
        print(f"cluster {args.name}: removed {len(removed)} containers and their data volumes" if removed
              else f"no containers of a cluster named {args.name} that kafka-canary created")
        return 0
    LocalCluster.open(args.dir).down()
    print(f"cluster in {args.dir} stopped; node logs kept under {args.dir}/nodes")
    return 0


def _restart(args: argparse.Namespace, role: Role) -> int:
    from canary.cluster.local import LocalCluster

    config = _config_changes(getattr(args, "config", None))  # checked before the cluster is touched
    cluster = LocalCluster.open(args.dir)
    extra = {}
    if getattr(args, "rack", None) is not None:
        extra["rack"] = args.rack or None  # --rack '' removes the rack
    if getattr(args, "client_delay_ms", None) is not None:
        extra["client_delay_ms"] = args.client_delay_ms
    cluster.restart_node(args.id, version=args.version, config=config,
                         kill=args.kill, wait=not args.no_wait, timeout=args.timeout, role=role, **extra)
    node = cluster.state.node(args.id)
    details = [f"rack {node.rack or '-'}"] if "rack" in extra else []
    if "client_delay_ms" in extra:
        details.append(f"clients reach it through a {node.client_delay_ms:g} ms delay proxy on port {node.proxy_port}"
                       if node.client_delay_ms > 0 else "no client delay")
    print(f"{role} {args.id} restarted on Kafka {node.version}" + "".join(f", {d}" for d in details)
          + ("" if args.no_wait else "; cluster healthy"))
    return 0


def cmd_cluster_restart_broker(args: argparse.Namespace) -> int:
    return _restart(args, "broker")


def cmd_cluster_restart_controller(args: argparse.Namespace) -> int:
    return _restart(args, "controller")


def cmd_cluster_stop_broker(args: argparse.Namespace) -> int:
    from canary.cluster.local import LocalCluster

    cluster = LocalCluster.open(args.dir)
    cluster.state.node(args.id, "broker")
    cluster.stop_node(args.id, kill=args.kill)
    print(f"broker {args.id} stopped ({'killed' if args.kill else 'controlled shutdown'})")
    return 0


def cmd_cluster_start_broker(args: argparse.Namespace) -> int:
    from canary.cluster.local import LocalCluster

    cluster = LocalCluster.open(args.dir)
    cluster.state.node(args.id, "broker")
    cluster.start_node(args.id, wait=not args.no_wait, timeout=args.timeout)
    print(f"broker {args.id} started")
    return 0


def cmd_cluster_add_broker(args: argparse.Namespace) -> int:
    from canary.cluster.local import LocalCluster

    node_id = LocalCluster.open(args.dir).add_broker(version=args.version, rack=args.rack,
                                                     config=_key_values(args.config), timeout=args.timeout)
    print(f"broker {node_id} added")
    return 0


def cmd_cluster_remove_broker(args: argparse.Namespace) -> int:
    from canary.cluster.local import LocalCluster

    LocalCluster.open(args.dir).remove_broker(args.id, force=args.force)
    print(f"broker {args.id} removed")
    return 0


def cmd_cluster_features(args: argparse.Namespace) -> int:
    from canary.cluster.local import LocalCluster

    levels = LocalCluster.open(args.dir).features()
    text = "\n".join(f"{name:<36} finalized {levels.finalized.get(name, 0):>3}   supported {lo}-{hi}"
                     for name, (lo, hi) in sorted(levels.supported.items()))
    _print(levels.to_dict(), args.json, text)
    return 0


def cmd_cluster_finalize(args: argparse.Namespace) -> int:
    from canary.cluster.local import LocalCluster

    changes = LocalCluster.open(args.dir).finalize(release=args.release, levels=_feature_levels(args.feature),
                                                    dry_run=args.dry_run)
    verb = "would raise" if args.dry_run else "raised"
    text = "\n".join(f"{verb} {name}: {old} -> {new}" for name, (old, new) in changes.items()) or \
        "nothing to finalize: every level asked for is already reached"
    _print({name: {"from": old, "to": new} for name, (old, new) in changes.items()}, args.json, text)
    return 0


def _cluster_action(actions: argparse._SubParsersAction, name: str, func, help_text: str,
                    timeout: bool = True) -> argparse.ArgumentParser:
    """A `kafka-canary cluster` action: every one takes --dir, those that wait for health --timeout."""
    action = actions.add_parser(name, help=help_text)
    action.add_argument("--dir", type=Path, default=default_cluster_dir(),
                        help="cluster directory (default: $KAFKA_CANARY_CLUSTER_DIR or %(default)s)")
    if timeout:
        action.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for health")
    action.set_defaults(func=func)
    return action


def _runtime_options(action: argparse.ArgumentParser) -> None:
    action.add_argument("--runtime", choices=("local", "docker"), default="local",
                        help="local: our own JVMs in --dir (default); docker: containers on the Docker engine "
                             "(DOCKER_HOST), images by $KAFKA_CANARY_IMAGE (default apache/kafka:{version})")
    action.add_argument("--name", default="kafka-canary", help="docker: the cluster's name (container names and "
                                                               "the io.kafka-canary.cluster label)")


def _add_cluster_lifecycle(actions: argparse._SubParsersAction) -> None:
    up = _cluster_action(actions, "up", cmd_cluster_up, "format and start a cluster, wait until healthy")
    up.add_argument("--brokers", type=int, default=3)
    up.add_argument("--controllers", type=int, default=1, help="controller quorum size: 1, 3 or 5")
    up.add_argument("--version", default=distribution.BASELINE_VERSION, help="Kafka version of every node")
    up.add_argument("--broker-version", action="append", metavar="ID=VERSION", help="one broker on another version")
    up.add_argument("--racks", help="comma-separated rack names, assigned to brokers round-robin")
    up.add_argument("--config", action="append", metavar="KEY=VALUE", help="broker config override (repeatable)")
    up.add_argument("--base-port", type=int, help="first port; nodes take the next ones, then each broker's "
                                                  "replication listener (default: free ports)")
    _runtime_options(up)
    up.add_argument("--security", choices=("plaintext", "sasl_ssl"), default="plaintext",
                    help="the brokers' client listener: plaintext (default) or sasl_ssl (TLS with certificates made "
                         "here, SCRAM-SHA-512 user admin; see docs/security.md)")

    status = _cluster_action(actions, "status", cmd_cluster_status, "nodes, versions, pids and health", timeout=False)
    status.add_argument("--json", action="store_true")
    metrics = _cluster_action(actions, "metrics", cmd_cluster_metrics, "each broker's own metrics as the gate reads "
                              "them (docs/metrics.md), two readings --interval apart", timeout=False)
    metrics.add_argument("--interval", type=float, default=5.0, help="seconds between the two readings (rates)")
    metrics.add_argument("--json", action="store_true")
    down = _cluster_action(actions, "down", cmd_cluster_down, "stop every node and delete the data (logs are kept)",
                           timeout=False)
    _runtime_options(down)
    client_config = _cluster_action(actions, "client-config", cmd_cluster_client_config,
                                    "the librdkafka settings a client of this cluster needs (properties lines)",
                                    timeout=False)
    client_config.add_argument("--show-secret", action="store_true", help="include sasl.password")
    client_config.add_argument("--json", action="store_true", help="a JSON object (a spec's cluster.client)")


def _add_cluster_nodes(actions: argparse._SubParsersAction) -> None:
    for role, func in (("broker", cmd_cluster_restart_broker), ("controller", cmd_cluster_restart_controller)):
        restart = _cluster_action(actions, f"restart-{role}", func,
                                  f"restart one {role}, optionally on another version or config")
        restart.add_argument("id", type=int)
        restart.add_argument("--version", help="Kafka version to run after the restart")
        if role == "broker":
            restart.add_argument("--config", action="append", metavar="KEY=VALUE",
                                 help="set a config override; KEY= removes it (repeatable)")
            restart.add_argument("--rack", help="broker.rack from this restart on ('' removes it); the canary "
                                                "marker travels here, e.g. a:canary-broker")
            restart.add_argument("--client-delay-ms", type=float, metavar="N",
                                 help="fault injection: clients reach the broker through a proxy that delays their "
                                      "requests N ms (replication is not delayed); 0 removes the proxy")
        restart.add_argument("--kill", action="store_true", help="hard kill instead of controlled shutdown")
        restart.add_argument("--no-wait", action="store_true", help="do not wait for the cluster to be healthy")

    stop = _cluster_action(actions, "stop-broker", cmd_cluster_stop_broker, "stop one broker", timeout=False)
    stop.add_argument("id", type=int)
    stop.add_argument("--kill", action="store_true", help="hard kill (SIGKILL) instead of controlled shutdown")
    start = _cluster_action(actions, "start-broker", cmd_cluster_start_broker, "start a stopped broker")
    start.add_argument("id", type=int)
    start.add_argument("--no-wait", action="store_true")

    add_broker = _cluster_action(actions, "add-broker", cmd_cluster_add_broker, "add a broker with the next free id")
    add_broker.add_argument("--version")
    add_broker.add_argument("--rack")
    add_broker.add_argument("--config", action="append", metavar="KEY=VALUE")
    remove_broker = _cluster_action(actions, "remove-broker", cmd_cluster_remove_broker,
                                    "stop, unregister and delete a broker", timeout=False)
    remove_broker.add_argument("id", type=int)
    remove_broker.add_argument("--force", action="store_true", help="even if it still hosts partition replicas")


def _add_cluster_features(actions: argparse._SubParsersAction) -> None:
    features = _cluster_action(actions, "features", cmd_cluster_features, "finalized and supported feature levels",
                               timeout=False)
    features.add_argument("--json", action="store_true")
    finalize = _cluster_action(actions, "finalize", cmd_cluster_finalize, "raise finalized feature levels (KIP-584)",
                               timeout=False)
    finalize.add_argument("--release", help="feature release whose levels to finalize, e.g. 4.1 (default: the one "
                                            "every node runs); kraft.version is left alone unless named")
    finalize.add_argument("--feature", action="append", metavar="NAME=LEVEL", help="finalize exactly this level")
    finalize.add_argument("--dry-run", action="store_true", help="validate with the controller, change nothing")
    finalize.add_argument("--json", action="store_true")


def register(sub: argparse._SubParsersAction) -> None:
    cluster = sub.add_parser("cluster", help="a KRaft cluster of our own: local JVMs (default) or containers")
    actions = cluster.add_subparsers(dest="action", required=True)
    _add_cluster_lifecycle(actions)
    _add_cluster_nodes(actions)
    _add_cluster_features(actions)
