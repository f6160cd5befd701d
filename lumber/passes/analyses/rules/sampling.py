"""Counterfactual samples from a rule by simulated annealing (paper section 6, Appendix C).

A sample keeps the case's values outside S and takes values for S from the
training rows' values that lie in the rule's box (the marginal law of each
feature inside the box). Simulated annealing maximizes an isolation forest's
inlier score over such samples, so the sample sits in a dense region.

Two changes to Appendix C, both documented here:

* A proposal resamples a random part of S from the current state (each
  feature with probability 1/2, at least one), so the chain is local; the
  listing redraws every feature of S at each step, which makes the "annealing"
  a plain random search. The Metropolis test accepts a worse state with
  probability ``exp(diff / t)`` (``diff < 0``), ``t = temp / log(i + 2)``; the
  listing's ``exp(-diff / t)`` is always >= 1 for a worse state.
* With ``guided=True`` (the default) the energy is the inlier score minus
  ``penalty`` when the explained model does not reach the target, so the
  chain prefers samples that really change the decision. ``guided=False`` is
  the paper's score-only energy. Either way every returned sample is checked
  on the explained model and flagged.

All jobs advance in lockstep so one call scores every job's batch; each job
draws from its own random stream (``seed``, job key), so a case's samples do
not depend on which other cases are sampled with it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
import numpy.typing as npt

from lumber.ir.domains import DomainKind, FeatureDomain

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.int64]
Evaluate = Callable[[FloatArray, IntArray], tuple[FloatArray, BoolArray, FloatArray]]
"""``(candidates, owner job per candidate) -> (inlier score, reaches the owner's target, energy bonus)``."""


@dataclass(frozen=True)
class AnnealOptions:
    batch: int = 100
    """Candidates proposed per job and iteration."""
    max_iter: int = 60
    temp: float = 0.05
    patience: int = 10
    """Stop a job after this many iterations without improvement once its best sample is an inlier."""
    guided: bool = True
    penalty: float = 1.0
    robust_sigma: float = 0.158
    """When > 0, reward samples whose decision survives noise on the changed features: Gaussian
    noise of this standard deviation, in units of each feature's training range (the paper's
    noisy-response experiment; 0.158 = sqrt(0.025) is its middle level on [0, 1]-scaled features),
    ``robust_draws`` fixed draws, weight ``robust_weight`` times the share of draws that keep the
    target; inliers only (a plausible sample always beats an outlier). This pulls samples into the
    interior of the rule's box, away from the decision boundary. 0: the paper's energy (inlier score
    only). 128 draws because a chain overfits fewer fixed draws; the middle noise level because it lifts
    stability at the two larger levels without losing the lowest (the diabetes regression, the hardest
    bundled target, in ``bench/rules.py --datasets diabetes``); compas keeps its stability."""
    robust_draws: int = 128
    robust_weight: float = 1.0
    robust_rerank: int = 8
    """With a robustness reward, the ``robust_rerank`` best distinct candidates of each chain are
    re-scored on ``robust_check`` fresh noise draws and the most robust plausible one is kept (a chain
    overfits its fixed draws)."""
    robust_check: int = 128
    robust_polish: int = 3
    """With a robustness reward, the ``robust_polish`` most robust candidates after the re-rank are
    improved by a coordinate search inside their rule's box (``recourse.polish``: one feature at a
    time takes the pool value whose point keeps the target in most of ``robust_draws`` common noisy
    copies, inliers reaching the target only), then ranked again with the others on fresh draws.
    0: off."""
    robust_target: float = 0.95
    """Local rules: while a case's best sample keeps the target in fewer than this share of noisy copies
    at sigma^2 = 0.01 (its robustness report), further feature sets are tried (``RuleOptions.widen``)
    and the most robust plausible sample is kept."""


@dataclass(frozen=True)
class SampleJob:
    """One chain: a case, the features it may change, and the value pool of each."""

    x: FloatArray
    features: IntArray
    pools: tuple[FloatArray, ...]
    key: int


@dataclass(frozen=True)
class Drawn:
    x: FloatArray
    score: float
    valid: bool
    energy: float


def _propose(job: SampleJob, base: FloatArray, n: int, rng: np.random.Generator, everything: bool) -> FloatArray:
    out = np.repeat(base[None, :], n, axis=0)
    s = job.features.shape[0]
    if everything:
        mask = np.ones((n, s), dtype=bool)
    else:
        mask = rng.random((n, s)) < 0.5
        none = ~mask.any(axis=1)
        mask[np.flatnonzero(none), rng.integers(0, s, int(none.sum()))] = True
    for k, j in enumerate(job.features):
        pool = job.pools[k]
        vals = pool[rng.integers(0, pool.shape[0], n)]
        out[:, j] = np.where(mask[:, k], vals, out[:, j])
    return out


def _energy(score: FloatArray, valid: BoolArray, bonus: FloatArray, opt: AnnealOptions) -> FloatArray:
    """Inlier score, minus ``penalty`` off target (guided), plus the robustness bonus for inliers only
    (the evaluator computes it for inliers that reach the target): robustness ranks plausible
    samples, it never buys an outlier."""
    bonus = np.where(score >= 0, bonus, 0.0)
    return score + bonus - (opt.penalty * (~valid) if opt.guided else 0.0)  # type: ignore[no-any-return]


def anneal(jobs: Sequence[SampleJob], evaluate: Evaluate, options: AnnealOptions = AnnealOptions(), *,
           seed: int = 0, n_samples: int = 1) -> list[list[Drawn]]:
    """Up to ``n_samples`` distinct samples per job, best energy first."""
    m = len(jobs)
    if m == 0:
        return []
    opt = options
    rngs = [np.random.default_rng([seed, int(j.key)]) for j in jobs]
    curr = np.stack([_propose(j, j.x, 1, rngs[i], True)[0] for i, j in enumerate(jobs)])
    sc, va, bo = evaluate(curr, np.arange(m, dtype=np.int64))
    curr_e = _energy(sc, va, bo, opt)
    best: list[list[Drawn]] = [[Drawn(curr[i].copy(), float(sc[i]), bool(va[i]), float(curr_e[i]))] for i in range(m)]
    active = np.ones(m, dtype=bool)
    stall = np.zeros(m, dtype=np.int64)
    for it in range(opt.max_iter):
        act = np.flatnonzero(active)
        if act.size == 0:
            break
        cand = np.concatenate([_propose(jobs[i], curr[i], opt.batch, rngs[i], False) for i in act.tolist()])
        owner = np.repeat(act, opt.batch).astype(np.int64)
        sc, va, bo = evaluate(cand, owner)
        en = _energy(sc, va, bo, opt)
        t = opt.temp / math.log(it + 2.0)
        for a, i in enumerate(act):
            sl = slice(a * opt.batch, (a + 1) * opt.batch)
            e = en[sl]
            top = int(np.argmax(e))
            improved = e[top] > best[i][0].energy
            best[i] = _merge(best[i], cand[sl], sc[sl], va[sl], e, n_samples)
            stall[i] = 0 if improved else stall[i] + 1
            if best[i][0].energy >= 0 and stall[i] > opt.patience:
                active[i] = False
            diff = float(e[top] - curr_e[i])
            if diff > 0 or rngs[i].random() < math.exp(diff / t):
                curr[i], curr_e[i] = cand[sl][top], e[top]
    return best


def _merge(kept: list[Drawn], X: FloatArray, sc: FloatArray, va: BoolArray, en: FloatArray, n: int) -> list[Drawn]:
    """The ``n`` best distinct samples among those kept and a new batch."""
    order = np.argsort(-en, kind="stable")[: n * 4 + 1]
    pool = kept + [Drawn(X[i].copy(), float(sc[i]), bool(va[i]), float(en[i])) for i in order]
    pool.sort(key=lambda d: -d.energy)
    out: list[Drawn] = []
    seen: set[bytes] = set()
    for d in pool:
        k = d.x.tobytes()
        if k in seen:
            continue
        seen.add(k)
        out.append(d)
        if len(out) == n:
            break
    return out


def value_pool(raw: FloatArray, ruled: FloatArray, lo: float, hi: float,
               allowed: FloatArray | None = None, domain: FeatureDomain | None = None,
               x0: float | None = None) -> FloatArray:
    """Training values of one feature inside ``lo < x <= hi`` (tested as the rule forest reads them).

    ``raw`` are the values as the explained model reads them, ``ruled`` as the rule
    forest does (row-aligned). With a ``domain`` (and the case's value ``x0``) only values a
    person could move ``x0`` to are kept: in the domain's bounds and kind (integer, binary,
    category codes, whole steps) and at least its resolution away from ``x0``. When no
    training value qualifies, one value inside the interval stands in: its midpoint (or the
    finite end nearest to it), or with a discrete domain the domain value nearest to the
    midpoint; empty when the interval holds no domain value at all.
    """
    with np.errstate(invalid="ignore"):
        ok = (ruled > lo) & (ruled <= hi) & ~np.isnan(raw)
    if allowed is not None:
        ok &= np.isin(raw, allowed)
    vals = raw[ok]
    if domain is not None and vals.size and (domain.discrete or vals.min() < domain.lower
                                             or vals.max() > domain.upper):
        vals = vals[domain.fine(np.nan if x0 is None else float(x0), vals)]
    if vals.size:
        return vals
    if domain is not None and domain.discrete:
        return _domain_point(domain, lo, hi, x0)
    if np.isfinite(lo) and np.isfinite(hi):
        return np.array([(lo + hi) / 2.0 if hi - lo > 2e-300 else hi])
    if np.isfinite(hi):
        return np.array([hi])
    if np.isfinite(lo):
        return np.array([float(np.nextafter(lo, np.inf))])
    return np.array([0.0])


def _domain_point(domain: FeatureDomain, lo: float, hi: float, x0: float | None) -> FloatArray:
    """The value of a discrete domain inside ``lo < v <= hi`` (and the domain's bounds) nearest to the
    interval's midpoint, at least the resolution away from ``x0``; empty when there is none."""
    a, b = max(lo, domain.lower), min(hi, domain.upper)
    if domain.kind == DomainKind.CATEGORICAL and domain.codes is not None:
        cand = np.array(domain.codes, dtype=np.float64)
    elif domain.kind == DomainKind.BINARY:
        cand = np.array([0.0, 1.0])
    else:
        s = domain.resolution
        o = domain.origin(float(x0)) if x0 is not None and np.isfinite(x0) else 0.0
        if not (np.isfinite(a) or np.isfinite(b)):
            base = float(x0) if x0 is not None and np.isfinite(x0) else 0.0
            a, b = base - 2 * s, base + 2 * s
        elif not np.isfinite(a):
            a = b - 2 * s
        elif not np.isfinite(b):
            b = a + 2 * s
        first, last = np.ceil((a - o) / s), np.floor((b - o) / s)
        if last - first > 1e6:
            mid = (a + b) / 2
            first = last = np.round((mid - o) / s)
        cand = o + s * np.arange(first, last + 1)
    with np.errstate(invalid="ignore"):
        cand = cand[(cand > lo) & (cand <= hi)]
    x = np.nan if x0 is None else float(x0)
    cand = np.array([v for v in cand.tolist() if not domain.problem(x, v)], dtype=np.float64)
    if cand.size == 0:
        return cand
    finite = [v for v in (lo, hi) if np.isfinite(v)]
    mid = float(np.mean(finite)) if finite else (x if np.isfinite(x) else 0.0)
    return cand[[int(np.argmin(np.abs(cand - mid)))]]


__all__ = ["AnnealOptions", "Drawn", "SampleJob", "anneal", "value_pool"]
