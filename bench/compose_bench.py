"""The compose stack (docker-compose.yaml) from `up -d` until every long-running service is healthy, and `down -v`,
on the images tests/compose_stack builds here (built first, not timed) and its host-network override.

    .venv/bin/python bench/compose_bench.py [--repeat 3]

Needs a Docker engine (DOCKER_HOST or the local socket) and Docker Compose.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from canary.containers import engine

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from compose_stack import stack_images  # noqa: E402
from compose_stack.stack import LONG_RUNNING, Stack  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    client = engine.connect()
    started = time.monotonic()
    built = stack_images.build(client, Path.home() / ".cache" / "kafka-canary")
    print(f"images ready in {time.monotonic() - started:.0f} s", flush=True)
    ups, healthy, downs = [], [], []
    with tempfile.TemporaryDirectory(prefix="compose-bench-") as tmp:
        for i in range(args.repeat):
            stack = Stack.write(Path(tmp), built.environment())
            stack.down()
            t0 = time.monotonic()
            try:
                stack.up()
                ups.append(time.monotonic() - t0)
                stack.wait_healthy(client, LONG_RUNNING)
                healthy.append(time.monotonic() - t0)
            finally:
                t1 = time.monotonic()
                stack.down()
                downs.append(time.monotonic() - t1)
            print(f"run {i + 1}: `up -d` returned after {ups[-1]:.0f} s, all healthy after {healthy[-1]:.0f} s, "
                  f"`down -v` {downs[-1]:.0f} s", flush=True)
    for name, values in (("up -d returned", ups), ("up to healthy", healthy), ("down -v", downs)):
        print(f"{name:16} min {min(values):5.0f} s  median {statistics.median(values):5.0f} s  "
              f"max {max(values):5.0f} s  ({len(values)} runs, {len(LONG_RUNNING)} services)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
