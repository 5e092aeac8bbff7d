"""`kafka-canary`: the command line. Errors a user can act on print one line and exit 2 (4 when they stopped a run
unfinished: canary.outcome has the exit codes); so does an unexpected error (never exit 1, which a release pipeline
reads as ROLLBACK): its traceback goes to a file the line names, and to stderr as well with KAFKA_CANARY_DEBUG=1."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import traceback
from pathlib import Path

from canary import process
from canary.cluster import distribution, metrics_agent
from canary.errors import CanaryError
from canary.kafka.secrets import redact_urls
from canary.outcome import Outcome

DEBUG_ENV = "KAFKA_CANARY_DEBUG"  # 1: an unexpected error's traceback on stderr too


# ----- setup and demo -----

def cmd_setup(args: argparse.Namespace) -> int:
    for version in args.versions or [distribution.BASELINE_VERSION, distribution.TARGET_VERSION]:
        dist = distribution.ensure(version)
        print(f"Kafka {dist.version}: {dist.libs} ({dist.source})")
    print(f"brokers' metrics agent: {metrics_agent.agent_jar()}")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from canary.demo import run_demo

    return run_demo(brokers=args.brokers, version=args.version, directory=args.dir, keep=args.keep, bad=args.bad,
                    engine=args.engine, upgrade=args.upgrade, project=args.project)


class _Parser(argparse.ArgumentParser):
    """A usage mistake is one line too (exit 2), pointing at --help instead of printing the whole usage.
    Subcommand parsers are of the same class (argparse builds them with the parent's class)."""

    def error(self, message: str):
        # argparse quotes the arguments it refuses: a URL's credentials masked, a line break or a huge value cut
        self.exit(2, f"error: {self.prog}: {_one_line(message)[:600]}; see `{self.prog} --help`\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="kafka-canary", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    _add_setup_and_demo(sub)

    # Other areas add their subcommands here, one `register(sub)` call each. Plain imports, so the import-layer
    # check sees that the command line sits on top of them.
    from canary import airflow_stack, cluster_cli, release
    from canary.analysis import cli as analysis_cli
    from canary.containers import cli as image_cli
    from canary.probe import cli as probe_cli
    from canary.rollout.broker import cli as broker_cli
    from canary.rollout.client import cli as client_cli
    from canary.rollout.migration import cli as migration_cli
    from canary.sweep import cli as sweep_cli

    for area in (cluster_cli, analysis_cli, probe_cli, broker_cli, client_cli, release, sweep_cli, airflow_stack,
                 migration_cli, image_cli):
        area.register(sub)
    return parser


def _add_setup_and_demo(sub: argparse._SubParsersAction) -> None:
    setup = sub.add_parser("setup", help="check Java and Maven, fetch Kafka releases into the cache")
    setup.add_argument("versions", nargs="*", help="Kafka versions (default: the baseline and target)")
    setup.set_defaults(func=cmd_setup)

    demo = sub.add_parser("demo", help="the main job: the broker rollout DAG end to end (`airflow dags test`) on a "
                                       "local cluster, local Spark and Airflow on SQLite; exit 0 when verified")
    demo.add_argument("--brokers", type=int, default=4)
    demo.add_argument("--version", default=distribution.BASELINE_VERSION, help="the cluster's starting version")
    demo.add_argument("--bad", action="store_true", help="a bad canary (message.max.bytes=100): shows the rollback")
    demo.add_argument("--upgrade", action="store_true",
                      help="the canary is upgraded to Kafka 4.1.2 (instead of num.io.threads=6 on the baseline)")
    demo.add_argument("--engine", choices=("spark", "inline"), default="spark",
                      help="the final analysis: the Spark task (default) or the judge in-process")
    demo.add_argument("--dir", type=Path, help="working directory: Airflow home, cluster, run directories "
                                               "(default: a temporary one)")
    demo.add_argument("--keep", action="store_true", help="leave the cluster running")
    demo.add_argument("--project", type=Path, metavar="DIR",
                      help="the kafka-canary checkout whose DAGs run (default: "
                           "$KAFKA_CANARY_PROJECT, else the working directory)")
    demo.set_defaults(func=cmd_demo)




def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if argv is None:  # the command line, not a caller inside another program (tests, the DAG's tasks)
        process.interrupt_on_sigterm()
    try:
        return args.func(args)
    except CanaryError as exc:
        print(f"error: {_one_line(str(exc))}", file=sys.stderr)
        return exc.exit_code  # 2; 4 for a run that stopped unfinished (canary.outcome)
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # a bug or an input nobody foresaw: one line and exit 2, the traceback kept
        print(f"error: {unexpected(exc)}", file=sys.stderr)
        return Outcome.ERROR.exit_code


def _one_line(text: str) -> str:
    """An error as one line, any URL's credentials masked."""
    return redact_urls(" ".join(text.split()) or "(no message)")


def unexpected(exc: BaseException) -> str:
    """The one line for an unexpected error; its traceback (credentials in URLs masked) goes to a file the line
    names, and to stderr first when $KAFKA_CANARY_DEBUG is 1."""
    trace = redact_urls("".join(traceback.format_exception(exc)))
    if os.environ.get(DEBUG_ENV) == "1":
        sys.stderr.write(trace)
    try:
        with tempfile.NamedTemporaryFile("w", prefix="kafka-canary-error-", suffix=".txt", delete=False) as file:
            file.write(trace)
        where = f"the traceback is in {file.name}"
    except OSError:
        where = f"set {DEBUG_ENV}=1 to see the traceback"
    message = _one_line(str(exc))[:300]
    return f"unexpected {type(exc).__name__}: {message} ({where}; please report it)"


if __name__ == "__main__":
    sys.exit(main())
