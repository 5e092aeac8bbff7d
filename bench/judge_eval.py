"""Judge quality: A/A false rollbacks and A/B detection under continuous monitoring, side by side with a
Kayenta-style judge on the same simulated runs.

    .venv/bin/python bench/judge_eval.py [--aa 1000] [--ab 200] [--workers 1] [--seed 1]
                                         [--observations RUN.jsonl] [--scenarios NAME ...]

A run: a 5-minute window at 10 msg/s per partition, 1 canary and 2 baseline partitions, 10 s buckets, a
30 s warm-up; looks every `--look-s` seconds (interim looks: fail fast on critical metrics; the last look
is final). A run counts as a rollback when any look says ROLLBACK; time to decision is that look's time.
Latency: lognormal (median 5 ms, sigma 0.5); baseline produce errors 0.1 %, no loss. Injected effects:
p99 +X % (values above the baseline p90 stretched by X, so p99 moves by X and p50 not at all), produce
error rate +points, loss 0.1 %; "all lat. +25 %" scales every canary latency (p50 to p99 all move).
"A/A, loss 0.01 % both" loses one in 10,000 acknowledged messages in both lanes (what the loss tolerance
costs when the whole cluster is lossy).

With --observations (a real probe run's JSONL, e.g. `kafka-canary probe --observations-file`), one more A/A
scenario resamples that run: each simulated 10 s bucket takes a random real bucket and draws both lanes'
outcomes and latencies, with replacement, from its pooled observations, so real shapes (whole
milliseconds, heavy tails) and real drift that hits both lanes at once are kept.

Kayenta-style judge: at each look, per metric, a two-sided Mann-Whitney U test at 98 % confidence of the
canary's per-bucket values against the baseline's (after the warm-up); a metric fails when significant in
its bad direction; score = weighted share of passing metrics; the look fails when the score is below 95
(Kayenta's default pass threshold); like a Spinnaker canary stage, the first failing look rolls back.
"(SLO only)": our rollbacks decided by an absolute SLO guard alone (the shared cluster itself out of its
SLO, e.g. a real run from an overloaded machine), not by the lane comparison.
"""

from __future__ import annotations

import argparse
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
from scipy.stats import mannwhitneyu

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from canary.judge import Aggregates, JudgeConfig, judge  # noqa: E402
from canary.judge import histogram as H  # noqa: E402

BUCKET_MS, WINDOW_S, RATE, CANARY_PARTS, BASELINE_PARTS = 10_000, 300, 10, 1, 2
MEDIAN, SIGMA, BASE_ERR = 5.0, 0.5, 0.001
Q90 = MEDIAN * np.exp(1.2816 * SIGMA)

SCENARIOS = {
    "A/A": {},
    "p99 +10 %": {"p99": 0.10}, "p99 +25 %": {"p99": 0.25}, "p99 +50 %": {"p99": 0.50},
    "all lat. +25 %": {"scale": 0.25},
    "errors +0.5 pt": {"err": 0.005}, "errors +1 pt": {"err": 0.01}, "errors +5 pt": {"err": 0.05},
    "loss 0.1 %": {"loss": 0.001},
    "A/A, loss 0.01 % both": {"loss_both": 0.0001},
}
REAL_AA = "A/A real resampled"
_REAL: list[dict] = []  # per real bucket: outcomes and latencies pooled over both lanes (set by --observations)


def load_real(path: Path) -> list[dict]:
    """A real run's observations, pooled per 10 s bucket: outcome names, e2e and produce latencies (ms)."""
    from canary.observations import Observation

    by_bucket: dict[int, list] = {}
    with open(path) as f:
        for line in f:
            if line.strip():
                o = Observation.from_json(line)
                by_bucket.setdefault(o.send_ts // BUCKET_MS, []).append(o)
    pools = []
    for _, obs in sorted(by_bucket.items()):
        if len(obs) < 20:  # a partial first or last bucket
            continue
        pools.append({"outcome": np.array([o.outcome for o in obs]),
                      "e2e": np.array([o.e2e_latency_ms if o.e2e_latency_ms is not None else np.nan for o in obs]),
                      "produce": np.array([o.produce_latency_ms if o.produce_latency_ms is not None else np.nan
                                           for o in obs])})
    if not pools:
        raise SystemExit(f"error: {path} holds no full {BUCKET_MS // 1000} s bucket of observations")
    return pools


def _simulate_real(rng: np.random.Generator, pools: list[dict]) -> list[tuple]:
    rows = []
    picks = rng.integers(len(pools), size=WINDOW_S * 1000 // BUCKET_MS)
    for lane, parts in (("canary", CANARY_PARTS), ("baseline", BASELINE_PARTS)):
        for b, pick in enumerate(picks):
            t, pool = b * BUCKET_MS, pools[pick]
            n = RATE * parts * BUCKET_MS // 1000
            i = rng.integers(len(pool["outcome"]), size=n)
            names, counts = np.unique(pool["outcome"][i], return_counts=True)
            rows += [(lane, t, f"outcome.{o}", 0, int(c)) for o, c in zip(names, counts, strict=True)]
            rows += [(lane, t, "partition", p if lane == "canary" else 10 + p, n // parts) for p in range(parts)]
            for source, key in (("e2e_latency_ms", "e2e"), ("produce_latency_ms", "produce")):
                values = pool[key][i]
                k, c = _bins(values[~np.isnan(values)])
                rows += [(lane, t, source, int(a), int(z)) for a, z in zip(k, c, strict=True)]
    return rows


def _bins(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    b = np.where(x < H.UNIT, 0, 1 + np.floor(np.log(np.maximum(x, H.UNIT) / H.UNIT) / H.LN_BASE)).astype(int)
    return np.unique(b, return_counts=True)


def simulate(rng: np.random.Generator, effect: dict) -> list[tuple]:
    rows = []
    for lane, parts in (("canary", CANARY_PARTS), ("baseline", BASELINE_PARTS)):
        canary = lane == "canary"
        err = BASE_ERR + (effect.get("err", 0.0) if canary else 0.0)
        loss = (effect.get("loss", 0.0) if canary else 0.0) + effect.get("loss_both", 0.0)
        for b in range(WINDOW_S * 1000 // BUCKET_MS):
            t = b * BUCKET_MS
            n = RATE * parts * BUCKET_MS // 1000
            n_err = rng.binomial(n, err)
            n_lost = rng.binomial(n - n_err, loss)
            ok = n - n_err - n_lost
            rows += [(lane, t, "outcome.delivered", 0, ok), (lane, t, "outcome.produce_error", 0, n_err),
                     (lane, t, "outcome.lost", 0, n_lost)]
            rows += [(lane, t, "partition", p if canary else 10 + p, n // parts) for p in range(parts)]
            lat = rng.lognormal(np.log(MEDIAN), SIGMA, ok)
            if canary and effect.get("scale"):
                lat = lat * (1 + effect["scale"])
            if canary and effect.get("p99"):
                lat = np.where(lat > Q90, Q90 + (lat - Q90) * (1 + effect["p99"] * _stretch()), lat)
            for source, values in (("e2e_latency_ms", lat), ("produce_latency_ms", rng.lognormal(np.log(2), 0.4, n))):
                k, c = _bins(values)
                rows += [(lane, t, source, int(a), int(z)) for a, z in zip(k, c, strict=True)]
    return rows


def _stretch() -> float:
    """Factor on (x - q90) that moves the p99 by exactly the requested share of p99."""
    q99 = MEDIAN * np.exp(2.3263 * SIGMA)
    return q99 / (q99 - Q90)


# ----- the Kayenta-style judge -----

def _series(agg: Aggregates, lane: str, buckets: list[int], name: str) -> np.ndarray:
    out = []
    for b in buckets:
        o = agg.outcomes(lane, b)
        n = sum(o.values()) or 1
        if name.startswith("e2e_p"):
            out.append(H.quantile(agg.hist(lane, "e2e_latency_ms", b), int(name[5:]) / 100) or 0.0)
        elif name == "produce_p99":
            out.append(H.quantile(agg.hist(lane, "produce_latency_ms", b), 0.99) or 0.0)
        elif name == "throughput":
            out.append((n - o.get("produce_error", 0)) / max(1, len(agg.hist(lane, "partition", b))))
        else:
            out.append(o.get(name, 0) / n)
    return np.array(out, dtype=float)


KAYENTA_METRICS = {"e2e_p50": ("increase", 1), "e2e_p95": ("increase", 1), "e2e_p99": ("increase", 2),
                   "produce_p99": ("increase", 1), "produce_error": ("increase", 2), "lost": ("increase", 2),
                   "consume_error": ("increase", 2), "duplicate": ("increase", 0.5), "out_of_order": ("increase", 0.5),
                   "throughput": ("decrease", 1)}


def kayenta_look(agg: Aggregates, warmup_s: float = 30.0) -> bool:
    """True when this look fails (score below 95)."""
    buckets = agg.buckets()
    buckets = [b for b in buckets if b >= buckets[0] + warmup_s * 1000]
    if len(buckets) < 3:
        return False
    total = passed = 0.0
    for name, (direction, weight) in KAYENTA_METRICS.items():
        c, b = _series(agg, "canary", buckets, name), _series(agg, "baseline", buckets, name)
        total += weight
        if np.all(c == c[0]) and np.all(b == c[0]):
            passed += weight
            continue
        p = mannwhitneyu(c, b, alternative="two-sided").pvalue
        worse = np.median(c) > np.median(b) if direction == "increase" else np.median(c) < np.median(b)
        if not (p < 0.02 and worse):
            passed += weight
    return 100 * passed / total < 95


# ----- one replay -----

def replay(args: tuple) -> tuple:
    scenario, seed, look_s = args[:3]
    rng = np.random.default_rng(seed)
    if scenario == REAL_AA:
        if not _REAL:
            _REAL.extend(load_real(Path(args[3])))
        rows = _simulate_real(rng, _REAL)
    else:
        rows = simulate(rng, SCENARIOS[scenario])
    config = JudgeConfig()
    looks = list(range(look_s, WINDOW_S + 1, look_s))
    ours, ours_t, kay_t, slo_only = "INCONCLUSIVE", None, None, False
    for i, look in enumerate(looks):
        agg = Aggregates.from_rows([r for r in rows if r[1] < look * 1000], BUCKET_MS)
        final = i == len(looks) - 1
        if ours_t is None:
            verdict = judge(agg, config, final=final)
            v = verdict["verdict"]
            if v == "ROLLBACK":
                ours, ours_t, slo_only = v, look, not any(_by_comparison(m) for m in verdict["metrics"])
            elif final:
                ours = v
        if kay_t is None and kayenta_look(agg):
            kay_t = look
    return scenario, ours, ours_t, kay_t, slo_only


def _by_comparison(m: dict) -> bool:
    """A failed metric whose lane comparison (or canary tolerance) decided, not only an absolute SLO guard."""
    return m["decision"] == "FAIL" and (bool(m["test"].get("significant"))
                                        or bool((m.get("tolerance") or {}).get("exceeded")))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--aa", type=int, default=1000, help="A/A replays")
    p.add_argument("--ab", type=int, default=200, help="replays per A/B scenario")
    p.add_argument("--look-s", type=int, default=60, help="seconds between looks")
    p.add_argument("--workers", type=int, default=1, help="processes (the machine may be shared)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--observations", type=Path, help="a real probe run (JSONL) to resample for one more A/A")
    p.add_argument("--scenarios", nargs="+", help=f"only these (default: all); names: {list(SCENARIOS)}, {REAL_AA!r}")
    args = p.parse_args(argv)
    scenarios = list(SCENARIOS) + ([REAL_AA] if args.observations else [])
    if args.scenarios:
        unknown = sorted(set(args.scenarios) - set(scenarios))
        if unknown:
            p.error(f"unknown scenarios {unknown}")
        scenarios = [s for s in scenarios if s in args.scenarios]
    if args.observations:
        load_real(args.observations)  # fail early on a bad file
    jobs = [(s, args.seed * 1_000_003 + i + 7919 * k, args.look_s, str(args.observations))
            for k, s in enumerate(scenarios) for i in range(args.aa if s in ("A/A", REAL_AA) else args.ab)]
    start = time.monotonic()
    with ProcessPoolExecutor(args.workers) as pool:
        results = list(pool.map(replay, jobs, chunksize=8))
    print(f"{len(jobs)} replays, looks every {args.look_s} s over {WINDOW_S} s, {RATE} msg/s per partition, "
          f"{CANARY_PARTS} canary + {BASELINE_PARTS} baseline partitions; {time.monotonic() - start:.0f} s\n")
    header = (f"{'scenario':<22}{'runs':>6} | {'ours: rollback':>15}{'(SLO only)':>11}{'promote':>9}{'inconcl.':>9}"
              f"{'median t':>9} | {'Kayenta: rollback':>18}{'median t':>9}")
    print(header)
    print("-" * len(header))
    for s in scenarios:
        rs = [r for r in results if r[0] == s]
        n = len(rs)
        ours_rb = [r[2] for r in rs if r[1] == "ROLLBACK"]
        kay_rb = [r[3] for r in rs if r[3] is not None]
        med = lambda xs: f"{np.median(xs):.0f} s" if xs else "-"  # noqa: E731
        print(f"{s:<22}{n:>6} | {100 * len(ours_rb) / n:>14.1f}%{100 * sum(r[4] for r in rs) / n:>10.1f}%"
              f"{100 * sum(r[1] == 'PROMOTE' for r in rs) / n:>8.1f}%"
              f"{100 * sum(r[1] == 'INCONCLUSIVE' for r in rs) / n:>8.1f}%{med(ours_rb):>9} | "
              f"{100 * len(kay_rb) / n:>17.1f}%{med(kay_rb):>9}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
