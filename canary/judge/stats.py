"""Anytime-valid tests and intervals used by the judge (numpy only).

Every test here is an e-process: a non-negative process whose expectation under the null is at most
1 at every time, so by Ville's inequality the chance that it *ever* reaches 1/alpha, however often it is
looked at, is at most alpha. Mixing over a fixed grid of alternatives keeps that property and gives
power against effects of unknown size.

Two-sample comparisons are conditional: in each time bucket, given how many events the two lanes
saw together, the canary's share of them has a known null distribution (Fisher's exact hypergeometric
for rates and latency exceedances; binomial for Poisson counts such as throughput). The lanes are
compared inside each bucket, so drift that hits both lanes (load, GC, a noisy neighbour) cancels.
"""

from __future__ import annotations

import numpy as np
from scipy.special import gammaln

# Alternatives, as multiples of the null odds ratio / rate ratio: 1.2x .. 30x, log-spaced.
GRID = np.exp(np.linspace(np.log(1.2), np.log(30.0), 16))
LOG_PRIOR = np.full(GRID.size, -np.log(GRID.size))


def _lchoose(n, k):
    return gammaln(n + 1) - gammaln(k + 1) - gammaln(n - k + 1)


def _lse(a: np.ndarray, axis: int) -> np.ndarray:
    m = np.max(a, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    return np.squeeze(m, axis=axis) + np.log(np.sum(np.exp(a - m), axis=axis))


def _hypergeom_log_lr(xc, k, nc, nb, log_psi0: float, log_alt: np.ndarray) -> np.ndarray:
    """log P_alt(xc) - log P_psi0(xc) under Fisher's noncentral hypergeometric; buckets x alternatives.

    All buckets at once: the support of each bucket is padded to the largest one and masked."""
    lo, hi = np.maximum(0, k - nb), np.minimum(k, nc)
    width = int((hi - lo).max()) + 1
    support = lo[:, None] + np.arange(width)[None, :]
    valid = support <= hi[:, None]
    s = np.where(valid, support, lo[:, None])
    logw = np.where(valid, _lchoose(nc[:, None], s) + _lchoose(nb[:, None], k[:, None] - s), -np.inf)
    norm_null = _lse(logw + s * log_psi0, axis=1)
    norm_alt = _lse(logw[:, None, :] + s[:, None, :] * log_alt[None, :, None], axis=2)
    return xc[:, None] * (log_alt - log_psi0)[None, :] - norm_alt + norm_null[:, None]


def conditional_log_e(xc, xb, nc, nb, psi0: float = 1.0, exact: bool = True, decrease: bool = False) -> np.ndarray:
    """Running log e-value, one per bucket, for H0: canary's odds (exact) or rate (Poisson) is at most
    psi0 times the baseline's (at least, with decrease=True).

    xc/xb: canary/baseline events per bucket; nc/nb: trials (exact) or exposure (Poisson) per bucket.
    exact=True uses the hypergeometric conditional (events among trials); exact=False the binomial
    conditional of two Poisson counts with exposures nc, nb. Under H0 the canary's conditional share is
    stochastically no larger (smaller) than under psi0 and the likelihood ratio is monotone, so every
    grid component is a supermartingale and so is the mixture.
    """
    xc, xb, nc, nb = (np.asarray(a, dtype=float) for a in (xc, xb, nc, nb))
    sign = -1.0 if decrease else 1.0
    log_psi0 = float(np.log(psi0))
    log_alt = log_psi0 + sign * np.log(GRID)
    k = xc + xb
    use = (k > 0) & (nc > 0) & (nb > 0)
    steps = np.zeros((xc.size, GRID.size))
    if use.any():
        i = np.flatnonzero(use)
        if exact:
            steps[i] = _hypergeom_log_lr(xc[i], k[i], nc[i], nb[i], log_psi0, log_alt)
        else:
            p0 = psi0 * nc[i] / (psi0 * nc[i] + nb[i])
            alt = np.exp(log_alt)[None, :]
            pa = alt * nc[i, None] / (alt * nc[i, None] + nb[i, None])
            steps[i] = xc[i, None] * (np.log(pa) - np.log(p0)[:, None]) + \
                xb[i, None] * (np.log1p(-pa) - np.log1p(-p0)[:, None])
    return _lse(np.cumsum(steps, axis=0) + LOG_PRIOR[None, :], axis=1)


def one_sample_log_e(x, n, p0: float) -> np.ndarray:
    """Running log e-value per bucket for H0: P(event) <= p0, from events x among n trials per bucket
    (an absolute SLO guard on one lane). Alternatives: odds p0/(1-p0) times the grid."""
    x, n = np.cumsum(np.asarray(x, dtype=float)), np.cumsum(np.asarray(n, dtype=float))
    odds = p0 / (1 - p0) * GRID
    pa = odds / (1 + odds)
    log_lr = x[:, None] * (np.log(pa) - np.log(p0))[None, :] + \
        (n - x)[:, None] * (np.log1p(-pa) - np.log1p(-p0))[None, :]
    return _lse(log_lr + LOG_PRIOR[None, :], axis=1)


_P_GRID = np.concatenate([[0.0], np.exp(np.linspace(np.log(1e-7), np.log(0.5), 800)),
                          1 - np.exp(np.linspace(np.log(0.5), np.log(1e-7), 800))[1:], [1.0]])


def bernoulli_cs(x: float, n: float, alpha: float) -> tuple[float, float]:
    """Anytime-valid confidence sequence for a Bernoulli mean at the current time: the p for which the
    Beta(1/2, 1/2) mixture likelihood ratio stays below 1/alpha (Robbins' method of mixtures)."""
    if n <= 0:
        return 0.0, 1.0
    a, b = 0.5, 0.5
    log_mix = gammaln(a + x) + gammaln(b + n - x) - gammaln(a + b + n) - (gammaln(a) + gammaln(b) - gammaln(a + b))
    with np.errstate(divide="ignore", invalid="ignore"):
        log_lik = np.where(x > 0, x * np.log(_P_GRID), 0.0) + np.where(n - x > 0, (n - x) * np.log1p(-_P_GRID), 0.0)
    log_lik = np.nan_to_num(log_lik, nan=-np.inf)
    inside = _P_GRID[log_mix - log_lik < np.log(1 / alpha)]
    if inside.size == 0:
        p = x / n
        return p, p
    return float(inside.min()), float(inside.max())


def dkw_radius(n: float, alpha: float) -> float:
    """Half-width of a confidence sequence for a whole CDF, uniform over values and time
    (Howard & Ramdas 2022, Thm. 2): |F_n - F| <= 0.85 sqrt((log log(e n) + 0.8 log(1612 / alpha)) / n)."""
    if n <= 0:
        return 1.0
    return float(0.85 * np.sqrt((np.log(np.log(np.e * n)) + 0.8 * np.log(1612 / alpha)) / n))
