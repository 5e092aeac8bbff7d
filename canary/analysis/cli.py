"""`kafka-canary analyze`: one analysis (canary.analysis.analyze) with its verdict as the exit code: 0 PROMOTE,
1 ROLLBACK, 3 INCONCLUSIVE, 2 error."""

from __future__ import annotations

import argparse

from canary.analysis import ENGINES, AnalysisRequest, analyze
from canary.analysis.request import add_arguments
from canary.analysis.result import summary
from canary.analysis.submit import DEFAULT_MASTER


def cmd_analyze(args: argparse.Namespace) -> int:
    result = analyze(AnalysisRequest.from_args(args), engine=args.engine, master=args.master)
    if result.engine == "inline" and result.verdict is not None:  # the Spark job prints its own
        print(summary(result.verdict))
        print(f"wrote {result.verdict_file}")
    return result.exit_code


def register(sub) -> None:
    p = sub.add_parser("analyze", help="canary analysis and the statistical gate; exit 0 promote, 1 rollback, "
                                       "3 inconclusive, 2 error")
    add_arguments(p)
    p.add_argument("--engine", choices=ENGINES, default="spark",
                   help="spark (default): the Spark job, any source; inline: one JSON-lines file judged in this "
                        "process, verdict.json only")
    p.add_argument("--master", default=DEFAULT_MASTER, help="Spark master (default: %(default)s)")
    p.set_defaults(func=cmd_analyze)
