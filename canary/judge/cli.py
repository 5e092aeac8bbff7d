"""`kafka-canary analyze`: runs spark_jobs/canary_analysis.py with spark-submit and returns its verdict as the
exit code (0 PROMOTE, 1 ROLLBACK, 3 INCONCLUSIVE, 2 error). For a kafka:// source the Spark Kafka source
jars are resolved from Maven Central first (once, cached) and passed with --jars."""

from __future__ import annotations

import argparse
import fcntl
import os
import shutil
import subprocess
import sys
from datetime import datetime
from pathlib import Path

from canary.errors import CanaryError

REPO = Path(__file__).resolve().parents[2]
JOB = REPO / "spark_jobs" / "canary_analysis.py"
POM = REPO / "spark_jobs" / "kafka-connector.pom.xml"
# Some Maven mirrors lack the newest spark-token-provider; its API is stable, so an older one is the fallback.
TOKEN_PROVIDER_FALLBACK = "4.0.0"


def _pyspark():
    import pyspark

    return Path(pyspark.__file__).parent, pyspark.__version__


def kafka_connector_jars() -> list[Path]:
    """The Kafka source jars for the installed pyspark (minus what pyspark already ships), from Maven Central
    into $KAFKA_CANARY_CACHE/spark-kafka-<version>. Raises CanaryError when Maven cannot resolve them."""
    home, version = _pyspark()
    cache = Path(os.environ.get("KAFKA_CANARY_CACHE") or Path.home() / ".cache" / "kafka-canary")
    target = cache / f"spark-kafka-{version}"
    done = target / ".complete"
    if not done.exists():
        if shutil.which("mvn") is None:
            raise CanaryError("Maven (mvn) is needed to fetch Spark's Kafka source; install it or use file sources")
        target.mkdir(parents=True, exist_ok=True)
        with open(target / ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            errors = []
            for token_version in (version, TOKEN_PROVIDER_FALLBACK):
                if done.exists():
                    break
                staging = target / "staging"
                shutil.rmtree(staging, ignore_errors=True)
                proc = subprocess.run(
                    ["mvn", "-q", "-B", "-f", str(POM), "dependency:copy-dependencies", "-DincludeScope=runtime",
                     f"-Dspark.version={version}", f"-Dtoken.provider.version={token_version}",
                     f"-DoutputDirectory={staging}"], capture_output=True, text=True, timeout=600)
                if proc.returncode != 0:
                    errors.append(proc.stdout[-2000:] + proc.stderr[-2000:])
                    continue
                shipped = {_artifact(p.name) for p in (home / "jars").glob("*.jar")}
                for jar in staging.glob("*.jar"):
                    if _artifact(jar.name) not in shipped:
                        shutil.move(str(jar), target / jar.name)
                shutil.rmtree(staging, ignore_errors=True)
                done.touch()
            if not done.exists():
                raise CanaryError(f"cannot resolve spark-sql-kafka-0-10 {version} from Maven Central:\n" +
                                  "\n".join(errors))
    return sorted(target.glob("*.jar"))


def _artifact(jar_name: str) -> str:
    """'kafka-clients-3.9.2.jar' -> 'kafka-clients'."""
    parts = jar_name.removesuffix(".jar").split("-")
    while parts and parts[-1][:1].isdigit():
        parts.pop()
    return "-".join(parts)


def spark_submit_command(args: argparse.Namespace) -> list[str]:
    home, _ = _pyspark()
    submit = shutil.which("spark-submit", path=str(Path(sys.executable).parent)) or str(home / "bin" / "spark-submit")
    cmd = [submit, "--master", args.master, "--conf", "spark.ui.enabled=false",
           "--conf", f"spark.pyspark.python={sys.executable}"]
    if args.observations.startswith("kafka://"):
        cmd += ["--jars", ",".join(str(j) for j in kafka_connector_jars())]
    cmd += [str(JOB), "--observations", args.observations, "--out", str(args.out)]
    for flag, value in (("--from", args.from_), ("--to", args.to), ("--config", args.config),
                        ("--run-id", args.run_id)):
        if value is not None:
            cmd += [flag, str(value)]
    if args.interim:
        cmd.append("--interim")
    return cmd


def _window_bound(flag: str, value) -> int | None:
    """Epoch ms from epoch ms or ISO-8601 (as the Spark job reads --from/--to); CanaryError naming the flag."""
    if value is None or isinstance(value, int):
        return value
    if str(value).strip().isdigit():
        return int(value)
    try:
        return int(datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp() * 1000)
    except ValueError:
        raise CanaryError(f"{flag} {value!r} is neither epoch milliseconds nor an ISO-8601 time such as "
                          f"2026-01-31T12:00:00Z") from None


def check_request(args: argparse.Namespace) -> None:
    """Refuses a request the Spark job would refuse only after starting (seconds later, in its log): a missing
    observations path, a bad window, a bad judge config."""
    if not args.observations.startswith("kafka://") and not Path(args.observations).exists():
        raise CanaryError(f"--observations {args.observations} does not exist; give a Parquet/JSON-lines file or "
                          f"directory, or kafka://HOST:PORT[/TOPIC]")
    start, end = _window_bound("--from", args.from_), _window_bound("--to", args.to)
    if start is not None and end is not None and start >= end:
        raise CanaryError(f"--from {args.from_} is not before --to {args.to}: the window would be empty")
    if args.config is not None:
        from canary.judge.config import load_config

        load_config(args.config)


def cmd_analyze(args: argparse.Namespace) -> int:
    check_request(args)  # one line and exit 2 before Spark starts
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    try:
        proc = subprocess.run(spark_submit_command(args), env=env, timeout=getattr(args, "timeout", None),
                              stdout=getattr(args, "log", None), stderr=subprocess.STDOUT if args.log else None)
    except subprocess.TimeoutExpired:
        print(f"error: the analysis did not finish within {args.timeout:.0f}s", file=sys.stderr)
        return 2
    return proc.returncode if proc.returncode in (0, 1, 3) else 2


def run_analysis(observations: str, out: Path, *, from_ms: int | None = None, to_ms: int | None = None,
                 config: str | None = None, run_id: str | None = None, interim: bool = False,
                 master: str = "local[2]", timeout: float | None = None, log=None) -> int:
    """The analysis job as a function (the rollout's gate calls it): the exit code, 0 PROMOTE, 1 ROLLBACK,
    3 INCONCLUSIVE, 2 error (a timeout included); `out`/verdict.json holds the verdict. `log`: an open file
    that receives spark-submit's output."""
    args = argparse.Namespace(observations=observations, out=Path(out), from_=from_ms, to=to_ms, config=config,
                              run_id=run_id, interim=interim, master=master, timeout=timeout, log=log)
    return cmd_analyze(args)


def register(sub) -> None:
    p = sub.add_parser("analyze", help="Spark canary analysis and the statistical gate; exit 0 promote, "
                                       "1 rollback, 3 inconclusive, 2 error")
    p.add_argument("--observations", required=True, metavar="SOURCE",
                   help="Parquet/JSON file or directory, or kafka://HOST:PORT[/TOPIC] (the observations topic)")
    p.add_argument("--from", dest="from_", metavar="T", help="window start: epoch ms or ISO-8601")
    p.add_argument("--to", metavar="T", help="window end (exclusive)")
    p.add_argument("--out", required=True, type=Path, metavar="DIR", help="verdict.json, aggregates.parquet, report")
    p.add_argument("--config", metavar="judge.yaml", help="judge thresholds (default: built-in)")
    p.add_argument("--run-id", help="only this run's observations")
    p.add_argument("--interim", action="store_true", help="interim look: only critical regressions decide")
    p.add_argument("--master", default="local[2]", help="Spark master (default: %(default)s)")
    p.set_defaults(func=cmd_analyze, timeout=None, log=None)
