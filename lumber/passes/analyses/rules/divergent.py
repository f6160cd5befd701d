"""Minimal divergent explanation: the smallest feature set S with ``CDP_S >= pi``.

``CDP_S`` is the probability of the target when S is resampled from its
conditional law given the other features. Resampling many features drifts
toward the base rate, so on data sets with few features often no set reaches
``pi`` (the paper's own Figure 1 example builds its rule on a set with CDP
0.58; on compas the Monte Carlo CDP of no set reaches 0.9 for most cases,
``bench/results/rules_cdp.md``). The rule's guarantee is its own probability
``CRP >= pi_c``; so unless ``strict``, the search then proposes sets by CDP,
highest first (``fallback="max_cdp"``, what the paper's code does: it keeps
the set of highest CDP when none reaches ``pi``), or the best set of each
size, smallest first (``fallback="smallest"``, sparser rules resting on less
probable sets); the result says the set did not reach ``pi``. These sets also
follow divergent sets that give no rule (on small data a set can reach ``pi``
on a cell of a single row and have no box with ``CRP >= pi_c``).

Candidates are the K features the rule forest splits on most (paper: K = 10),
minus those the constraints forbid to move. Sizes are tried in increasing
order; at each size every subset is scored at once with the bit-packed
Projected Forest (``score``: :func:`core.subset_cdp`, the paper's cell estimator) and the best subset wins if it
reaches ``pi``. When a size has more subsets than ``max_subsets`` the search
samples subsets from the forest's decision paths (features tested together on
a path, paper section 5) and always adds every one-feature extension of the
previous size's best set, so a greedy path is never lost.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Callable, Iterator

import numpy as np
import numpy.typing as npt

from .estimators import SENTINEL_BIT
from .table import LeafTable

IntArray = npt.NDArray[np.int64]
BitArray = npt.NDArray[np.uint64]
BoolArray = npt.NDArray[np.bool_]
FloatArray = npt.NDArray[np.float64]


FALLBACKS = ("max_cdp", "smallest")


@dataclass(frozen=True)
class Attempt:
    """A feature set to build rules on, in the order the search proposes them."""

    features: IntArray
    cdp: float
    divergent: bool
    """``CDP >= pi``: a divergent set (the first one proposed is the minimal divergent explanation)."""


@dataclass
class SearchLog:
    """What the search did (filled while it runs)."""

    evaluated: int = 0
    sampled: bool = False
    best_by_size: list[float] = field(default_factory=list)
    best_features: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))


def candidate_features(tab: LeafTable, movable: BoolArray, k: int, score: FloatArray | None = None) -> IntArray:
    """The ``k`` movable features the rule forest splits on with the highest ``score`` (default: the
    most splits; ties by column order)."""
    rank = tab.usage.astype(np.float64) if score is None else np.asarray(score, dtype=np.float64)
    usable = np.flatnonzero(movable & (tab.usage > 0))
    order = np.lexsort((usable, -rank[usable]))
    return usable[order[:k]].astype(np.int64)


@lru_cache(maxsize=256)
def _combinations(K: int, s: int) -> BitArray:
    combos = np.array(list(itertools.combinations(range(K), s)), dtype=np.uint64).reshape(-1, s)
    return np.bitwise_or.reduce(np.left_shift(np.uint64(1), combos), axis=1).astype(np.uint64)


def path_bits(tab: LeafTable, candidates: IntArray) -> BitArray:
    """Per leaf, the candidate features its path tests (as bits 0..K-1)."""
    K = candidates.shape[0]
    w = np.left_shift(np.uint64(1), np.arange(K, dtype=np.uint64))
    t = tab.tested[:, candidates].astype(np.uint64)
    return np.bitwise_or.reduce(t * w[None, :], axis=1) if K else np.zeros(tab.n_leaves, dtype=np.uint64)


def _sampled(tab: LeafTable, paths: BitArray, K: int, s: int, m: int, prev_best: int | None,
             rng: np.random.Generator) -> BitArray:
    """``m`` size-``s`` subsets drawn from decision paths, plus one-feature extensions of ``prev_best``."""
    p = tab.n_rows / tab.n_rows.sum()
    leaves = rng.choice(tab.n_leaves, size=m, p=p)
    on_path = ((paths[leaves][:, None] >> np.arange(K, dtype=np.uint64)[None, :]) & np.uint64(1)).astype(bool)
    prio = rng.random((m, K)) + np.where(on_path, 0.0, 1.0)
    pick = np.argsort(prio, axis=1, kind="stable")[:, :s].astype(np.uint64)
    masks = np.bitwise_or.reduce(np.left_shift(np.uint64(1), pick), axis=1)
    if prev_best is not None:
        ext = np.uint64(prev_best) | np.left_shift(np.uint64(1), np.arange(K, dtype=np.uint64))
        masks = np.concatenate([ext[ext != np.uint64(prev_best)], masks])
    _, first = np.unique(masks, return_index=True)
    return masks[np.sort(first)].astype(np.uint64)


def search_divergent(tab: LeafTable, score: Callable[[BitArray], FloatArray],
                     candidates: IntArray, log: SearchLog, *, pi: float, max_size: int | None = None,
                     search: str = "auto", max_subsets: int = 2048, strict: bool = False, per_size: int = 1,
                     fallback: str = "max_cdp", fallback_max_size: int | None = None,
                     rng: np.random.Generator | None = None) -> Iterator[Attempt]:
    """Feature sets to try, best first: divergent sets (CDP >= pi) by size, then CDP.

    ``score(masks)`` is the CDP of each subset mask (bits 0..K-1 = ``candidates``).
    The first set yielded (when any reaches ``pi``) is the minimal divergent
    explanation. Sizes are scored lazily, so a caller that is satisfied with
    the first set pays for the sizes up to it only. Unless ``strict``, after the
    divergent sets (if any) the ``per_size`` best sets below ``pi`` of every size follow, for rules
    whose own probability (CRP) may still reach ``pi_c``: ``fallback="max_cdp"``
    orders the best set of each size by CDP (ties: smaller first) among sizes up to
    ``fallback_max_size`` (the paper's code stops at half the features: resampling
    everything scores the base rate, often the highest CDP), then the larger sizes' best
    sets by size (for cases where no small set gives a rule), then the runners-up by CDP;
    ``"smallest"`` gives the best set
    of each size first (smallest first), then the runners-up by size and CDP.
    The later sets feed the plausibility widening of local rules.
    """
    K = int(candidates.shape[0])
    if K >= SENTINEL_BIT:
        raise ValueError(f"at most {SENTINEL_BIT - 1} candidate features")
    top = K if max_size is None else min(K, max_size)
    rng = rng if rng is not None else np.random.default_rng(0)
    paths = path_bits(tab, candidates) if search != "exhaustive" else None
    best_mask: int | None = None
    best_cdp = -1.0
    fallback_order = fallback
    if fallback_order not in FALLBACKS:
        raise ValueError(f"fallback must be one of {FALLBACKS}")
    fallback_sets: list[tuple[int, float, int]] = []
    for s in range(1, top + 1):
        n_sub = math.comb(K, s)
        if search == "exhaustive" or (search == "auto" and n_sub <= max_subsets):
            masks = _combinations(K, s)
        else:
            assert paths is not None
            masks = _sampled(tab, paths, K, s, max_subsets, best_mask, rng)
            log.sampled = True
        scores = score(masks)
        log.evaluated += int(masks.shape[0])
        order = np.argsort(-scores, kind="stable")
        best_mask = int(masks[order[0]])
        log.best_by_size.append(float(scores[order[0]]))
        if float(scores[order[0]]) > best_cdp:
            best_cdp = float(scores[order[0]])
            log.best_features = _features(candidates, best_mask)
        for i in order:
            if scores[i] < pi:
                break
            yield Attempt(_features(candidates, int(masks[i])), float(scores[i]), True)
        below = order[scores[order] < pi][:per_size]  # the best sets below pi (the divergent ones went first)
        fallback_sets.extend((s, float(scores[i]), int(masks[i])) for i in below)
    if strict:
        return
    # not strict: the sets below pi follow the divergent ones too. A set can reach pi on a cell of one
    # or two rows (small data) and still give no box with CRP >= pi_c; stopping there left the case
    # without a rule (diabetes: 4 of 19 cases) although sets below pi give one
    ranked = sorted(fallback_sets, key=lambda t: (t[0], -t[1]))
    firsts = [t for k, t in enumerate(ranked) if k == 0 or ranked[k - 1][0] != t[0]]
    rest = [t for k, t in enumerate(ranked) if not (k == 0 or ranked[k - 1][0] != t[0])]
    if fallback_order == "max_cdp":
        # each size's best set: those of at most ``cap`` features by CDP (the first is the paper's
        # choice), then the larger ones by size; then the runners-up by CDP
        cap = top if fallback_max_size is None else max(1, fallback_max_size)
        firsts = (sorted((t for t in firsts if t[0] <= cap), key=lambda t: (-t[1], t[0]))
                  + [t for t in firsts if t[0] > cap])
        rest = sorted(rest, key=lambda t: (-t[1], t[0]))
    for s, c, m in firsts + rest:
        yield Attempt(_features(candidates, m), c, False)


def _features(candidates: IntArray, mask: int) -> IntArray:
    bits = [b for b in range(candidates.shape[0]) if (mask >> b) & 1]
    return np.sort(candidates[bits]).astype(np.int64)


__all__ = ["FALLBACKS", "Attempt", "SearchLog", "candidate_features", "path_bits", "search_divergent"]
