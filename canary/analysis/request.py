"""What one analysis reads and writes, and its command-line form: the analysis job's arguments
(`--observations SOURCE [--from T --to T] --out DIR [--config judge.yaml] [--run-id ID] [--interim]
[--before FILE]`), which `kafka-canary analyze`, spark-submit and the Airflow DAG's SparkSubmitOperator all pass."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import yaml

from canary.analysis.errors import RequestError
from canary.judge import JudgeConfig, load_config

KAFKA_SCHEME = "kafka://"


def parse_time(value: str | int | None, flag: str = "time") -> int | None:
    """Epoch milliseconds from epoch milliseconds or an ISO-8601 time ('2026-01-31T12:00:00Z'); None stays None.
    Raises RequestError naming `flag`."""
    if value is None or isinstance(value, int):
        return value
    if str(value).strip().isdigit():
        return int(value)
    try:
        return int(datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp() * 1000)
    except ValueError:
        raise RequestError(f"{flag} {value!r} is neither epoch milliseconds nor an ISO-8601 time such as "
                           f"2026-01-31T12:00:00Z") from None


@dataclass(frozen=True)
class AnalysisRequest:
    """One analysis. `observations`: a Parquet or JSON-lines file or directory, or `kafka://HOST:PORT[/TOPIC]`
    (the observations topic, read by record time); `out`: where verdict.json (and, from the Spark job,
    aggregates.parquet and report.html) go; the window [from_ms, to_ms) and `run_id` select observations;
    `config`: a judge YAML (None: the built-in thresholds); `interim`: only critical regressions decide;
    `bucket_s`: the time bucket (None: the judge config's); `before`: a JSON-lines observations file of the same
    brokers before the change (a rollout's preflight probe), which the latency quantiles are calibrated by."""
    observations: str
    out: Path
    from_ms: int | None = None
    to_ms: int | None = None
    config: str | None = None
    run_id: str | None = None
    interim: bool = False
    bucket_s: float | None = None
    before: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "observations", str(self.observations))
        object.__setattr__(self, "out", Path(self.out))
        if self.config is not None:
            object.__setattr__(self, "config", str(self.config))
        # "" too: a templated command line (the Airflow DAG's) always passes the flag, empty without a file.
        object.__setattr__(self, "before", str(self.before) if self.before else None)

    @property
    def from_kafka(self) -> bool:
        return self.observations.startswith(KAFKA_SCHEME)

    @property
    def verdict_file(self) -> Path:
        return self.out / "verdict.json"

    @property
    def empty(self) -> bool:
        """The source is one local file with nothing in it: nothing to aggregate, nothing for Spark to do."""
        path = Path(self.observations)
        return not self.from_kafka and path.is_file() and path.stat().st_size == 0

    def check(self) -> JudgeConfig:
        """Refuses what the job would refuse only after starting (seconds later, in its log): a missing
        observations path, an empty window, a bad judge config. Returns the judge config."""
        if not self.from_kafka and not Path(self.observations).exists():
            raise RequestError(f"--observations {self.observations} does not exist; give a Parquet/JSON-lines file "
                               f"or directory, or kafka://HOST:PORT[/TOPIC]")
        if not self.from_kafka and not (Path(self.observations).is_file() or Path(self.observations).is_dir()):
            raise RequestError(f"--observations {self.observations} is a device, pipe or socket, which would be read "
                               f"forever; give a Parquet/JSON-lines file or directory, or kafka://HOST:PORT[/TOPIC]")
        if self.before is not None and not Path(self.before).is_file():
            raise RequestError(f"--before {self.before} is not a file; give the JSON-lines observations of a probe run "
                               f"before the change, or leave --before out")
        if self.from_ms is not None and self.to_ms is not None and self.from_ms >= self.to_ms:
            raise RequestError(f"--from {self.from_ms} is not before --to {self.to_ms}: the window would be empty")
        return load_config(self.config)

    def job_args(self) -> list[str]:
        """The analysis job's command-line arguments for this request."""
        args = ["--observations", self.observations, "--out", str(self.out)]
        for flag, value in (("--from", self.from_ms), ("--to", self.to_ms), ("--config", self.config),
                            ("--run-id", self.run_id), ("--bucket-s", self.bucket_s), ("--before", self.before)):
            if value is not None:
                args += [flag, str(value)]
        return args + (["--interim"] if self.interim else [])

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> AnalysisRequest:
        """The request of a command line parsed with add_arguments(); RequestError for a --from/--to that is
        not a time."""
        return cls(observations=args.observations, out=args.out, from_ms=parse_time(args.from_, "--from"),
                   to_ms=parse_time(args.to, "--to"), config=args.config, run_id=args.run_id,
                   interim=args.interim, bucket_s=getattr(args, "bucket_s", None), before=args.before)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The request's flags (the job's and `kafka-canary analyze`'s)."""
    parser.add_argument("--observations", required=True, metavar="SOURCE",
                        help="Parquet/JSON-lines file or directory, or kafka://HOST:PORT[/TOPIC] (the observations "
                             "topic)")
    parser.add_argument("--from", dest="from_", metavar="T", help="window start: epoch ms or ISO-8601")
    parser.add_argument("--to", metavar="T", help="window end (exclusive)")
    parser.add_argument("--out", required=True, type=Path, metavar="DIR",
                        help="verdict.json, aggregates.parquet, report")
    parser.add_argument("--config", metavar="judge.yaml", help="judge thresholds (default: built-in)")
    parser.add_argument("--run-id", help="only this run's observations")
    parser.add_argument("--interim", action="store_true", help="interim look: only critical regressions decide")
    parser.add_argument("--before", metavar="FILE",
                        help="JSON-lines observations of the same brokers before the change (a rollout's preflight "
                             "probe): latency quantiles are judged against how the brokers differed then")


def write_judge_config(config: JudgeConfig, path: Path) -> Path:
    """The judge config as the Spark job reads it back: YAML (YAML 1.1 would read JSON's 1e-07 as a string)."""
    path.write_text(yaml.safe_dump(config.to_dict(), sort_keys=False))
    return path
