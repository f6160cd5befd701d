"""From rules to concrete cases: counterfactual samples and the rule's hit rate on the model.

For a case ``x`` and its rules, every rule becomes one annealing chain over
the rule's box (training values only, clipped to allowed values); the best
samples over all of the case's rules are kept. Each sample is checked on the
explained model, scored by the isolation forest, and checked against the
constraints the box cannot express (linear relations, implications).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Sequence

import numpy as np
import numpy.typing as npt

from lumber.ir import Target
from lumber.passes.analyses.counterfactual.actionability import violations

from .actionable import allowed_values
from .boxes import unique_rows
from .context import RuleContext
from .results import Change, CounterfactualSample, Rule
from .sampling import Drawn, Evaluate, SampleJob, anneal, value_pool
from .targets import describe_decision
from .text import value_text

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.int64]

MAX_RULES_SAMPLED = 16

ROBUSTNESS_SIGMA2 = (0.01, 0.025, 0.05)
"""Noise variances of the robustness report (the paper's noisy-response experiment, [0, 1] scale)."""
ROBUSTNESS_DRAWS = 200
"""Noisy copies per sample and level in the report."""


def feature_span(ctx: RuleContext) -> FloatArray:
    """Each feature's training range (the [0, 1] scaling of the noise); 1 where it is empty."""
    with np.errstate(invalid="ignore"):
        span = np.nanmax(ctx.X_raw, axis=0) - np.nanmin(ctx.X_raw, axis=0)
    return np.where(np.isfinite(span) & (span > 0), span, 1.0)  # type: ignore[no-any-return]


def noisy_keep(ctx: RuleContext, x0: FloatArray, X: FloatArray, targets: Sequence[Target], sigma: float,
               draws: int, rng: np.random.Generator) -> FloatArray:
    """Per sample ``X[i]`` (changed from ``x0[i]``): the share of ``draws`` copies with Gaussian noise of
    standard deviation ``sigma`` (in units of each feature's range) on the changed features that the
    explained model still sends to ``targets[i]``."""
    if X.shape[0] == 0:
        return np.zeros(0)
    changed = ~((X == x0) | (np.isnan(X) & np.isnan(x0)))
    z = rng.normal(size=(draws,) + X.shape) * (sigma * feature_span(ctx))[None, None, :]
    noisy = (X[None] + z * changed[None]).reshape(-1, X.shape[1])
    dec = ctx.decide(noisy).reshape(draws, X.shape[0])
    keep = np.stack([targets[i].hit(dec[:, i]) for i in range(X.shape[0])], axis=1)
    return keep.mean(axis=0)  # type: ignore[no-any-return]


def robustness_report(ctx: RuleContext, x0: FloatArray, X: FloatArray, targets: Sequence[Target],
                      key: int, stream: int = 29) -> list[tuple[tuple[float, float], ...]]:
    """``(sigma^2, share)`` at each of ``ROBUSTNESS_SIGMA2`` for every sample (deterministic per ``key``;
    another ``stream`` draws other copies)."""
    rng = np.random.default_rng([ctx.options.seed, int(key), stream])
    shares = [noisy_keep(ctx, x0, X, targets, float(np.sqrt(s2)), ROBUSTNESS_DRAWS, rng) for s2 in ROBUSTNESS_SIGMA2]
    return [tuple((s2, float(sh[i])) for s2, sh in zip(ROBUSTNESS_SIGMA2, shares)) for i in range(X.shape[0])]


SCREEN_POINTS = 256
"""Random points per rule drawn by :func:`random_points` (the robustness screen of feature sets, and the
random candidates that join the annealing's before the robustness re-rank)."""
SCREEN_DRAWS = 32
"""Noisy copies per random point in the screen and in the sampler's random candidates."""
SCREEN_TOP, SCREEN_CHECK = 8, 128
"""The screen re-scores its ``SCREEN_TOP`` best points on ``SCREEN_CHECK`` fresh copies and reports the best
of those (the best share of 32 copies among 256 points is biased up by the selection: on the diabetes
regression a set screening 1.0 gave samples kept by 0.925 of their copies)."""


def random_points(x: FloatArray, jobs: Sequence[SampleJob], n: int,
                  rng: np.random.Generator) -> tuple[FloatArray, IntArray]:
    """Up to ``n`` distinct points per job -- the case with the job's features drawn independently from
    their value pools (:func:`_job`: training values in the rule's box, the case's own value allowed)
    -- and the job (index) of each point."""
    x = np.asarray(x, dtype=np.float64)
    pts: list[FloatArray] = []
    owner: list[IntArray] = []
    for r, job in enumerate(jobs):
        C = np.repeat(x[None, :], n, axis=0)
        for f, j in enumerate(job.features):
            C[:, j] = job.pools[f][rng.integers(0, job.pools[f].shape[0], n)]
        C = unique_rows(C)[0]
        pts.append(C)
        owner.append(np.full(C.shape[0], r, dtype=np.int64))
    if not pts:
        return np.zeros((0, x.shape[0])), np.zeros(0, dtype=np.int64)
    return np.concatenate(pts), np.concatenate(owner)


def robust_points(ctx: RuleContext, x: FloatArray, P: FloatArray, target: Target, rng: np.random.Generator,
                  sigma: float | None = None, draws: int = SCREEN_DRAWS) -> tuple[IntArray, FloatArray, FloatArray]:
    """The points of ``P`` that are inliers (every point without an inlier score) reaching the target,
    their inlier scores and their share of ``draws`` noisy copies (sd ``sigma``, default
    ``AnnealOptions.robust_sigma``) keeping the target."""
    if P.shape[0] == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0), np.zeros(0)
    if ctx.score is None:  # no inlier score: every point counts as plausible (as in the annealing)
        score, dec = np.zeros(P.shape[0]), ctx.decide(P)
    else:
        score, dec = ctx.score_and_decide(P)
    score = np.asarray(score, dtype=np.float64)
    ok = np.flatnonzero((score >= 0) & target.hit(dec))
    share = noisy_keep(ctx, np.repeat(np.asarray(x, dtype=np.float64)[None, :], ok.size, axis=0), P[ok],
                       [target] * ok.size, ctx.options.anneal.robust_sigma if sigma is None else sigma, draws, rng)
    return ok, score[ok], share


def screen_robustness(ctx: RuleContext, x: FloatArray, rule_sets: Sequence[Sequence[Rule]], target: Target,
                      key: int) -> FloatArray:
    """Per rule set: how robust the best of ``SCREEN_POINTS`` random points of its rules
    (:func:`random_points`; inliers reaching the target) is, as the share of noisy copies (sigma^2 =
    ``ROBUSTNESS_SIGMA2[0]``, the level ``robust_target`` is checked at) keeping the target: the
    ``SCREEN_TOP`` best by ``SCREEN_DRAWS`` copies each, re-scored on ``SCREEN_CHECK`` fresh ones; -1 when
    no drawn point is one.

    A cheap estimate of what sampling can find inside a set's boxes: local rules rank further feature
    sets by it before annealing the most promising (``local._widen``).
    """
    rng = np.random.default_rng([ctx.options.seed, int(key), 31])
    best = np.full(len(rule_sets), -1.0)
    for k, rs in enumerate(rule_sets):
        jobs = [j for j in (_job(ctx, x, rule, 0) for rule in rs[:MAX_RULES_SAMPLED]) if j is not None]
        _, again = best_random_points(ctx, x, jobs, target, rng, SCREEN_POINTS, SCREEN_DRAWS, SCREEN_TOP,
                                      SCREEN_CHECK)
        if again.size:
            best[k] = float(again.max())
    return best


def best_random_points(ctx: RuleContext, x: FloatArray, jobs: Sequence[SampleJob], target: Target,
                       rng: np.random.Generator, n: int, draws: int, top: int,
                       check: int) -> tuple[FloatArray, FloatArray]:
    """``n`` random points per job (:func:`random_points`); of the inliers reaching the target, the ``top``
    keeping it in most of ``draws`` noisy copies (sigma^2 = ``ROBUSTNESS_SIGMA2[0]``), re-scored on ``check``
    fresh copies (the best of few copies among many points is biased up by the selection). Returns those
    points and their fresh shares, in the order of the first ranking."""
    sigma = float(np.sqrt(ROBUSTNESS_SIGMA2[0]))
    P, _ = random_points(x, jobs, n, rng)
    ok, _, share = robust_points(ctx, x, P, target, rng, sigma=sigma, draws=draws)
    if not share.size:
        return np.zeros((0, np.asarray(x).shape[0])), np.zeros(0)
    best = P[ok[np.argsort(-share, kind="stable")[:top]]]
    return best, noisy_keep(ctx, np.repeat(np.asarray(x, dtype=np.float64)[None, :], best.shape[0], axis=0), best,
                            [target] * best.shape[0], sigma, check, rng)


POLISH_SIGMA = float(np.sqrt(ROBUSTNESS_SIGMA2[0]))
"""Noise sd of the sampler's coordinate search: the level ``AnnealOptions.robust_target`` is checked at
(on the diabetes regression 0.1 gave stability 0.93 at sigma^2 = 0.01, the reward's 0.158 0.92)."""
POLISH_DRAWS = 256
"""Common noisy copies per candidate in that search."""
POLISH_VALUES = 32
"""Values per feature tried in one coordinate step of :func:`polish` (evenly spaced quantiles of the pool)."""


def polish(ctx: RuleContext, x: FloatArray, job: SampleJob, starts: FloatArray, target: Target,
           rng: np.random.Generator, sigma: float, draws: int = 256, passes: int = 4) -> FloatArray:
    """Coordinate search on robustness from each of ``starts`` (points of ``job``'s box): one feature of
    the job at a time takes the value of its pool (up to ``POLISH_VALUES`` quantiles) whose point keeps
    the target in the largest share of ``draws`` noisy copies -- the same draws for every candidate
    (common random numbers, so a step compares points, not noise) -- among candidates that are
    inliers reaching the target; until a pass changes nothing. Returns the polished points (a start that
    is no plausible hit comes back as it is). The share it climbs is biased upward by the selection:
    score the result on fresh draws."""
    x = np.asarray(x, dtype=np.float64)
    out = np.array(starts, dtype=np.float64, copy=True)
    if out.shape[0] == 0:
        return out
    z = rng.normal(size=(draws, x.shape[0])) * (sigma * feature_span(ctx))[None, :]
    pools = []
    for f, j in enumerate(job.features.tolist()):
        u = np.unique(job.pools[f])
        if u.size > POLISH_VALUES:  # quantiles, and the case's own value when the pool holds it (stay)
            keep = np.unique(np.linspace(0, u.size - 1, POLISH_VALUES).round().astype(np.int64))
            u = np.union1d(u[keep], u[u == x[j]])
        pools.append(u)

    def value(C: FloatArray) -> FloatArray:
        if ctx.score is None:
            score, dec = np.zeros(C.shape[0]), ctx.decide(C)
        else:
            score, dec = ctx.score_and_decide(C)
        good = (np.asarray(score) >= 0) & target.hit(dec)
        v = np.full(C.shape[0], -1.0)
        if good.any():
            G = C[good]
            changed = ~((G == x[None]) | (np.isnan(G) & np.isnan(x[None])))
            noisy = (G[None] + z[:, None, :] * changed[None]).reshape(-1, G.shape[1])
            v[good] = target.hit(ctx.decide(noisy)).reshape(draws, -1).mean(axis=0)
        return v

    for i in range(out.shape[0]):
        p = out[i]
        best = float(value(p[None])[0])
        if best < 0:
            continue
        for _ in range(passes):
            moved = False
            for f, j in enumerate(job.features.tolist()):
                C = np.repeat(p[None], pools[f].size, axis=0)
                C[:, j] = pools[f]
                v = value(C)
                k = int(np.argmax(v))
                if v[k] > best:
                    best, p, moved = float(v[k]), C[k].copy(), True
            if not moved:
                break
        out[i] = p
    return out


STAY_SHARE = 0.25
"""Share of a sampling pool taken by the case's own value when it already lies in the rule's interval."""


def _job(ctx: RuleContext, x: FloatArray, rule: Rule, key: int, stay: bool = True) -> SampleJob | None:
    """The chain of one (case, rule); None when some feature's interval holds no domain value.

    With ``stay``, a feature of the rule whose case value already lies in its interval may keep it
    (a ``STAY_SHARE`` of its pool): the sample still follows the rule and changes fewer features,
    so it has fewer values to get wrong (the noisy-response experiment perturbs the changed ones).
    The box never holds the case's whole point, so some feature always changes."""
    S = np.array([iv.index for iv in rule.intervals], dtype=np.int64)
    dom = ctx.domains
    x = np.asarray(x, dtype=np.float64)
    ruled = ctx.table.forest.prepare_input(x[None, :])[0] if stay else x  # x as the rule forest reads it
    pools = []
    for iv in rule.intervals:
        j = iv.index
        pool = value_pool(ctx.X_raw[:, j], ctx.table.X[:, j], iv.lo, iv.hi, allowed_values(ctx.constraints,
                          iv.feature.name), None if dom is None else dom[j], float(x[j]))
        if stay and pool.size and iv.lo < ruled[j] <= iv.hi:
            allowed = allowed_values(ctx.constraints, iv.feature.name)
            if allowed is None or np.isin(x[j], allowed):
                pool = np.concatenate([pool, np.full(max(1, round(pool.size * STAY_SHARE / (1 - STAY_SHARE))), x[j])])
        pools.append(pool)
    if any(p.size == 0 for p in pools):
        return None
    return SampleJob(x, S, tuple(pools), key)


def _evaluator(ctx: RuleContext, jobs: Sequence[SampleJob], targets: Sequence[Target]) -> Evaluate:
    """Inlier score, target check (each against its own job's target) and robustness bonus of candidates."""
    groups: dict[object, int] = {}
    gid = np.array([groups.setdefault(t.key, len(groups)) for t in targets], dtype=np.int64)
    reps = {groups[t.key]: t for t in targets}
    opt = ctx.options.anneal
    x0 = np.stack([j.x for j in jobs]) if jobs else np.zeros((0, ctx.X_raw.shape[1]))
    noise = None
    if opt.robust_sigma > 0:
        span = feature_span(ctx)
        z = np.random.default_rng([ctx.options.seed, 7]).normal(size=(opt.robust_draws, ctx.X_raw.shape[1]))
        noise = z * opt.robust_sigma * span[None, :]

    def hit(dec: FloatArray, owner: IntArray) -> BoolArray:
        g = gid[owner]
        valid = np.zeros(dec.shape[0], dtype=bool)
        for k, t in reps.items():
            sel = g == k
            if sel.any():
                valid[sel] = t.hit(dec[sel])
        return valid

    memo: dict[bytes, float] = {}

    def evaluate(X: FloatArray, owner: IntArray) -> tuple[FloatArray, BoolArray, FloatArray]:
        uniq, inv = unique_rows(X)  # proposals repeat pool values often
        valid = hit(ctx.decide(uniq)[inv], owner)
        score = ctx.score(uniq)[inv] if ctx.score is not None else np.zeros(X.shape[0])
        bonus = np.zeros(X.shape[0])
        # the bonus ranks plausible samples that reach the target (sampling._energy), so only those pay
        # for the noisy copies, each distinct (candidate, job) once
        need = np.flatnonzero(valid & (np.asarray(score) >= 0)) if noise is not None else np.zeros(0, np.int64)
        if noise is not None and need.size:
            u, uinv = unique_rows(np.concatenate([X[need], owner[need, None].astype(np.float64)], axis=1))
            keys = [r.tobytes() for r in u]  # chains revisit states: each (candidate, job) is scored once
            new = np.array([i for i, k in enumerate(keys) if k not in memo], dtype=np.int64)
            if new.size:
                Xu, ou = u[new, :-1], u[new, -1].astype(np.int64)
                changed = ~((Xu == x0[ou]) | (np.isnan(Xu) & np.isnan(x0[ou])))
                D = noise.shape[0]
                noisy = (Xu[None, :, :] + noise[:, None, :] * changed[None, :, :]).reshape(-1, Xu.shape[1])
                kept = hit(ctx.decide(noisy), np.tile(ou, D)).reshape(D, -1).mean(axis=0)
                memo.update(zip((keys[i] for i in new.tolist()), kept.tolist()))
            share = np.array([memo[k] for k in keys], dtype=np.float64)
            bonus[need] = opt.robust_weight * share[uinv]
        return np.asarray(score, dtype=np.float64), valid, bonus

    return evaluate


def sample_cases(ctx: RuleContext, X: FloatArray, rules: Sequence[Sequence[Rule]], targets: Sequence[Target],
                 keys: Sequence[int], n_samples: int) -> list[tuple[CounterfactualSample, ...]]:
    """Up to ``n_samples`` samples for each case ``X[c]`` from its rules (best energy first)."""
    jobs: list[SampleJob] = []
    owner_case: list[int] = []
    owner_rule: list[int] = []
    job_targets: list[Target] = []
    for c, rs in enumerate(rules):
        for r, rule in enumerate(rs[:MAX_RULES_SAMPLED]):
            job = _job(ctx, X[c], rule, int(keys[c]) * MAX_RULES_SAMPLED + r)
            if job is None:
                continue
            jobs.append(job)
            owner_case.append(c)
            owner_rule.append(r)
            job_targets.append(targets[c])
    out: list[list[tuple[float, int, object]]] = [[] for _ in rules]
    opt = ctx.options.anneal
    robust = opt.robust_sigma > 0 and opt.robust_rerank > 0
    if n_samples > 0 and jobs:
        drawn = anneal(jobs, _evaluator(ctx, jobs, job_targets), opt, seed=ctx.options.seed,
                       n_samples=max(n_samples, opt.robust_rerank) if robust else n_samples)
        for j, ds in enumerate(drawn):
            for d in ds:
                out[owner_case[j]].append((d.energy, owner_rule[j], d))
        if robust:  # random points of the rules join the chains' candidates: a chain settles near its start
            for c in range(len(rules)):
                mine = [j for j in range(len(jobs)) if owner_case[j] == c]
                if not out[c] or not mine:
                    continue
                rng = np.random.default_rng([ctx.options.seed, int(keys[c]), 37])
                P, own = random_points(X[c], [jobs[j] for j in mine], SCREEN_POINTS, rng)
                ok, sc, share = robust_points(ctx, X[c], P, targets[c], rng)
                for k in np.argsort(-share, kind="stable")[:opt.robust_rerank].tolist():
                    e = float(sc[k] + opt.robust_weight * share[k])
                    r = owner_rule[mine[int(own[ok[k]])]]
                    out[c].append((e, r, Drawn(P[ok[k]].copy(), float(sc[k]), True, e)))
    names = ctx.names
    result: list[tuple[CounterfactualSample, ...]] = []
    for c, cand in enumerate(out):
        cand.sort(key=lambda t: (-t[0], t[1]))
        if robust and cand:
            # re-rank plausible valid candidates by robustness on fresh draws (ties: the chain's energy)
            cand = _rerank(ctx, X[c], cand, targets[c], np.random.default_rng([ctx.options.seed, int(keys[c]), 23]))
            if opt.robust_polish > 0:  # coordinate search from the most robust, ranked again on fresh draws
                job_of = {owner_rule[j]: jobs[j] for j in range(len(jobs)) if owner_case[j] == c}
                rng = np.random.default_rng([ctx.options.seed, int(keys[c]), 47])
                extra: list[tuple[float, int, object]] = []
                for e, r, start in cand[:opt.robust_polish]:
                    p0: Any = start
                    if not (p0.valid and p0.score >= 0) or r not in job_of:
                        continue
                    q = polish(ctx, X[c], job_of[r], p0.x[None, :], targets[c], rng, POLISH_SIGMA, POLISH_DRAWS)[0]
                    if not np.array_equal(q, p0.x):
                        q_score = float(ctx.score(q[None, :])[0]) if ctx.score is not None else 0.0
                        extra.append((e, r, Drawn(q, q_score, True, e)))
                if extra:
                    cand = _rerank(ctx, X[c], cand + extra, targets[c], rng)
        chosen: list[CounterfactualSample] = []
        seen: set[bytes] = set()
        for _, r, pick in cand:
            got: Any = pick
            x = got.x
            if x.tobytes() in seen:
                continue
            seen.add(x.tobytes())
            chosen.append(_sample(ctx, X[c], x, float(got.score), bool(got.valid), r, names))
            if len(chosen) == n_samples:
                break
        if chosen:
            Xs = np.stack([s.x for s in chosen])
            rep = robustness_report(ctx, np.repeat(X[c][None, :], len(chosen), axis=0), Xs, [targets[c]] * len(chosen),
                                    int(keys[c]))
            chosen = [replace(s, robustness=r) for s, r in zip(chosen, rep)]
        result.append(tuple(chosen))
    return result


def _rerank(ctx: RuleContext, x: FloatArray, cand: list[tuple[float, int, Any]], target: Target,
            rng: np.random.Generator) -> list[tuple[float, int, Any]]:
    """Candidates ``(energy, rule, Drawn)``: valid plausible ones first, by their share of
    ``robust_check`` fresh noisy copies keeping the target (ties: energy, then rule)."""
    opt = ctx.options.anneal
    Xc = np.stack([d.x for _, _, d in cand])
    share = noisy_keep(ctx, np.repeat(x[None, :], len(cand), axis=0), Xc, [target] * len(cand), opt.robust_sigma,
                       opt.robust_check, rng)
    order = sorted(range(len(cand)), key=lambda k: (
        not cand[k][2].valid, cand[k][2].score < 0, -share[k], -cand[k][0], cand[k][1]))
    return [cand[k] for k in order]


def _sample(ctx: RuleContext, x0: FloatArray, x: FloatArray, score: float, valid: bool, rule: int,
            names: Sequence[str]) -> CounterfactualSample:
    feats = ctx.model.schema.features
    changes = tuple(Change(names[j], float(x0[j]), float(x[j]), value_text(feats[j], float(x0[j])),
                           value_text(feats[j], float(x[j]))) for j in range(x.shape[0])
                    if not (x[j] == x0[j] or (np.isnan(x[j]) and np.isnan(x0[j]))))
    dec = ctx.decide(x[None, :])[0]
    viol: tuple[str, ...] = ()
    if ctx.constraints is not None:
        viol = tuple(violations(ctx.constraints, names, x0, x))
    if ctx.domains is not None:
        viol += tuple(p for p in ctx.domains.problems(x0, x) if p not in viol)
    return CounterfactualSample(x.copy(), changes, describe_decision(ctx.model, dec), valid, score, rule, viol)


def rule_hit_rate(ctx: RuleContext, x: FloatArray, rule: Rule, target: Target, n: int = 200,
                  seed: int = 0) -> float:
    """Share of cases drawn from the rule's box (training values, marginally) that reach the target.

    This measures the rule itself on the explained model, without the annealing's selection.
    """
    job = _job(ctx, x, rule, 0, stay=False)
    if job is None:  # no domain value in the box: no case can follow the rule
        return 0.0
    rng = np.random.default_rng(seed)
    Xc = np.repeat(np.asarray(x, dtype=np.float64)[None, :], n, axis=0)
    for k, j in enumerate(job.features):
        Xc[:, j] = job.pools[k][rng.integers(0, job.pools[k].shape[0], n)]
    return float(target.hit(ctx.decide(Xc)).mean())


__all__ = ["ROBUSTNESS_DRAWS", "ROBUSTNESS_SIGMA2", "SCREEN_DRAWS", "SCREEN_POINTS", "feature_span", "noisy_keep",
           "polish", "random_points", "robust_points", "robustness_report", "rule_hit_rate", "sample_cases", "screen_robustness"]
