"""Sensitive tests (Alvarez): where each case sits relative to the decision surface.

For a single tree, the nearest point whose decision differs from the case's is
the projection onto the nearest leaf of another decision (Algorithm 1 of the
paper, with its typo fixed: project onto leaves whose class *differs*). The
tests that projection crosses are the case's sensitive tests; crossing all of
them changes the decision, crossing a strict subset near the case does not
(Theorem 2). This is exact: every leaf is considered (vectorized over cases and
leaves in :mod:`.tree_projection`), and every witness point is verified on the
model.

Decisions are class indices for classifiers; for regression the caller gives an
interval and the decision is "prediction inside it or not" (``Target.interval``). The decision
sought is a :class:`lumber.ir.Target`: its ``index`` is a decision index (see
:func:`decision_labels`), ``None`` for the nearest change to any other decision.

For an ensemble the class regions are not unions of one tree's leaves: the
exact answer is the counterfactual MILP (``lumber.passes.analyses.counterfactual``, with
the same metric and constraints), which :func:`.sensitive.sensitive_tests` uses by default
(``method="milp"``; a case that hits the solver's time limit is marked inexact).
``method="upper-bound"`` runs the bounded search of :mod:`.sensitive_ensemble`
instead: verified points, labelled ``exact=False``.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import numpy.typing as npt

from lumber.ir import Forest, InputDataError, Norm, Target, Task, UnsupportedModelError
from lumber.ir.forest import ZERO_THRESHOLD
from lumber.ir.interp import accumulate, forest_apply
from lumber.passes.analyses.counterfactual import CounterfactualOptions, CounterfactualResult, solve_counterfactual
from lumber.ir.decision import class_labels, is_classifier, margin_decisions

from .leaf_boxes import LeafBoxes, tree_boxes
from .metrics import Metric
from .sensitive_results import UNREACHABLE, SensitiveResult, SensitiveTest
from .tree_projection import Bounds, TreePlan, block_size

def decision_labels(forest: Forest, goal: Target) -> tuple[Any, ...]:
    """Labels of the decisions: class labels, or ``("out", "in")`` for a regression interval."""
    return class_labels(forest) if is_classifier(forest) else ("out", "in")


def check_goal(forest: Forest, goal: Target) -> None:
    task = forest.schema.task
    if task == Task.ANOMALY:
        raise UnsupportedModelError("sensitive tests explain classifiers and regressors, not anomaly scores",
                                    "an isolation forest has no decision surface between classes")
    if task == Task.REGRESSION:
        if goal.interval is None:
            raise InputDataError("a regression model needs a target interval for sensitive tests",
                                 "pass target=(lo, hi): the decision explained is 'prediction in [lo, hi]'")
        if forest.n_outputs != 1:
            raise UnsupportedModelError("sensitive tests on multi-output regression are not supported")
        lo, hi = goal.interval
        if not (lo <= hi):
            raise InputDataError(f"target interval [{lo}, {hi}] is empty", "give lo <= hi")


def goal_decisions(forest: Forest, margins: npt.NDArray[np.float64], goal: Target) -> npt.NDArray[np.int64]:
    """Decision index of raw margins: the class ``predict`` picks, or inside the interval."""
    d = margin_decisions(forest.schema, margins)
    if is_classifier(forest):
        return d.astype(np.int64)
    assert goal.interval is not None
    return Target(interval=goal.interval).hit(d).astype(np.int64)


# -- single trees: exact projection ------------------------------------------------------------

def project_tree(forest: Forest, X: npt.NDArray[np.float64], metric: Metric, goal: Target,
                 check: bool = True) -> SensitiveResult:
    """Exact nearest decision change for every case (prepared rows ``X``) of a single-tree model.

    ``check=False`` leaves ``verified`` unset for a caller that verifies the final points itself.
    """
    boxes = tree_boxes(forest, 0)
    plan = TreePlan(forest, boxes, metric)
    labels = decision_labels(forest, goal)
    G = len(labels)
    lgroup = goal_decisions(forest, accumulate(forest, boxes.leaf[:, None]), goal)
    n = X.shape[0]
    case_row = np.searchsorted(boxes.leaf, forest_apply(forest, X)[:, 0])
    cgroup = lgroup[case_row]
    cfeat = np.flatnonzero(metric.constrained)
    blo, bhi = metric.case_bounds(X, cfeat)

    gdist = np.full((n, G), np.inf)
    grow = np.full((n, G), -1, dtype=np.int64)
    group_rows = [np.flatnonzero(lgroup == g) for g in range(G)]
    bs = block_size(plan.L)
    for s in range(0, n, bs):
        sl = slice(s, min(n, s + bs))
        acc = plan.costs(X[sl], _bounds(cfeat, blo, bhi, sl))
        cols = np.arange(acc.shape[1])
        for g, R in enumerate(group_rows):
            if R.size == 0:
                continue
            sub = acc[R] if R.size < plan.L else acc
            a = np.argmin(sub, axis=0)
            v = sub[a, cols]
            gdist[sl, g] = v
            grow[sl, g] = np.where(np.isfinite(v), R[a], -1)
    idx = np.arange(n)
    gdist[idx, cgroup] = 0.0
    grow[idx, cgroup] = case_row
    if metric.norm == Norm.L2:
        gdist = np.sqrt(gdist)
    target, dist = choose_target(gdist, cgroup, goal)
    ok = target >= 0
    bounds_all = _bounds(cfeat, blo, bhi, slice(None))
    point = _witness(plan, X, grow[idx, np.maximum(target, 0)], ok, bounds_all)
    group_point = None
    if G > 2:
        group_point = np.stack([_witness(plan, X, grow[:, g], grow[:, g] >= 0, bounds_all) for g in range(G)], axis=1)
    verified = np.zeros(n, dtype=bool)  # filled by _verify once the points are final
    leaf = np.where(ok, boxes.leaf[grow[idx, np.maximum(target, 0)]], -1)
    group_leaf = np.where(grow >= 0, boxes.leaf[np.maximum(grow, 0)], -1)
    result = SensitiveResult(
        forest=forest, metric=metric, X=X, distance=dist, point=point, group=cgroup, target_group=target,
        leaf=leaf, trace=boxes.depth[case_row], verified=verified, exact=True, method="projection",
        group_labels=labels, group_distance=gdist, group_point=group_point, group_leaf=group_leaf,
        messages=decision_messages(cgroup, target, labels, goal),
    )
    result.tests_of = TestExtractor(forest, metric, plan).tests
    if check:
        verify(result, goal)
    return result


def leaf_distances(forest: Forest, X: Any, metric: Metric, tree: int = 0
                   ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int64]]:
    """Distance from every case to every leaf of one tree (the paper's Table 5) and the leaf ids.

    Returns ``(n, L)`` distances (``inf`` where unreachable under the metric) and the
    ``L`` global leaf ids.
    """
    Xp = forest.prepare_input(X)
    boxes = tree_boxes(forest, tree)
    plan = TreePlan(forest, boxes, metric)
    cfeat = np.flatnonzero(metric.constrained)
    blo, bhi = metric.case_bounds(Xp, cfeat)
    acc = plan.costs(Xp, _bounds(cfeat, blo, bhi, slice(None))).T
    return (np.sqrt(acc) if metric.norm == Norm.L2 else acc), boxes.leaf


def _bounds(cfeat: npt.NDArray[np.int64], blo: npt.NDArray[np.float64], bhi: npt.NDArray[np.float64],
            sl: slice) -> Bounds:
    return {int(f): (blo[sl, j], bhi[sl, j]) for j, f in enumerate(cfeat)}


def choose_target(gdist: npt.NDArray[np.float64], cgroup: npt.NDArray[np.int64], goal: Target
                  ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
    """Per case, the decision to move to (the nearest other one, or the goal's) and its distance;
    ``-1`` where none is reachable."""
    n = gdist.shape[0]
    idx = np.arange(n)
    if goal.index is None:
        masked = gdist.copy()
        masked[idx, cgroup] = np.inf
        target = np.argmin(masked, axis=1).astype(np.int64)
        dist = masked[idx, target]
    else:
        target = np.full(n, goal.index, dtype=np.int64)
        dist = gdist[:, goal.index].copy()
    target[~np.isfinite(dist)] = -1
    return target, dist


def _witness(plan: TreePlan, X: npt.NDArray[np.float64], rows: npt.NDArray[np.int64], ok: npt.NDArray[np.bool_],
             bounds: Bounds) -> npt.NDArray[np.float64]:
    P = plan.witness(X, np.maximum(rows, 0), bounds)
    P[~ok] = np.nan
    return P


def decision_messages(cgroup: npt.NDArray[np.int64], target: npt.NDArray[np.int64], labels: tuple[Any, ...],
              goal: Target) -> dict[int, str]:
    out: dict[int, str] = {}
    for i in np.flatnonzero(target < 0):
        out[int(i)] = UNREACHABLE
    if goal.index is not None:
        for i in np.flatnonzero(cgroup == goal.index):
            out[int(i)] = f"already decided as {labels[goal.index]!s}"
    return out


class TestExtractor:
    """Turns a case, its witness point and the leaf reached into sensitive tests."""

    def __init__(self, forest: Forest, metric: Metric, plan: TreePlan | None = None) -> None:
        self.forest = forest
        self.metric = metric
        self.plan = plan
        self.boxes: LeafBoxes | None = plan.boxes if plan is not None else None
        self._thresholds: dict[int, tuple[npt.NDArray[np.float64], npt.NDArray[np.int64]]] = {}

    def tests(self, x: npt.NDArray[np.float64], p: npt.NDArray[np.float64] | None, leaf: int
              ) -> tuple[SensitiveTest, ...]:
        if p is None:
            return ()
        changed = np.flatnonzero(~((x == p) | (np.isnan(x) & np.isnan(p))))
        row = -1
        if self.boxes is not None and leaf >= 0:
            row = int(np.searchsorted(self.boxes.leaf, leaf))
        out = [self._test(int(f), float(x[f]), float(p[f]), row) for f in changed]
        return tuple(sorted(out, key=lambda t: (-t.margin, t.index)))

    def _test(self, f: int, xv: float, pv: float, row: int) -> SensitiveTest:
        m = self.metric
        name = m.names[f]
        if m.categorical[f]:
            cats: tuple[int, ...] = (int(pv),)
            node = -1
            if row >= 0 and self.plan is not None:
                boxes = self.plan.boxes
                k = next(c for c in self.plan.cats if c.f == f)
                cats = tuple(int(c) for c in np.flatnonzero(k.targets[row]))
                node = self._local(int(boxes.cat_node[row, list(boxes.cat_features).index(f)])
                                   if f in boxes.cat_features else -1)
            return SensitiveTest(name, f, "not in", None, "change", xv, pv, float(m.up[f]), cats,
                                 self._tree(row), node)
        up = pv > xv
        w = float(m.up[f] if up else m.down[f])
        thr, node = self._threshold(f, xv, pv, row)
        if thr is None:
            if abs(pv) <= ZERO_THRESHOLD or abs(xv) <= ZERO_THRESHOLD:
                op, thr = ("!=" if abs(pv) <= ZERO_THRESHOLD else "=="), 0.0
            else:
                op = "bound"
            margin = abs(pv - xv) * w
        else:
            op = "<=" if up else ">"
            margin = abs(thr - xv) * w
        return SensitiveTest(name, f, op, thr, "increase" if up else "decrease", xv, pv, float(margin),
                             None, self._tree(row) if node >= 0 else -1, self._local(node))

    def _threshold(self, f: int, xv: float, pv: float, row: int) -> tuple[float | None, int]:
        """The test crossed: the leaf's bound (single tree) or the last threshold passed."""
        up = pv > xv
        if self.boxes is not None and row >= 0:
            thr = self.boxes.lo[row, f] if up else self.boxes.hi[row, f]
            node = self.boxes.lo_node[row, f] if up else self.boxes.hi_node[row, f]
            crossed = np.isfinite(thr) and ((xv <= thr < pv) if up else (pv <= thr < xv))
            return (float(thr), int(node)) if crossed else (None, -1)
        thr_all, nodes = self._feature_thresholds(f)
        sel = (xv <= thr_all) & (thr_all < pv) if up else (pv <= thr_all) & (thr_all < xv)
        if not sel.any():
            return None, -1
        k = np.flatnonzero(sel)
        j = k[-1] if up else k[0]
        return float(thr_all[j]), int(nodes[j])

    def _feature_thresholds(self, f: int) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int64]]:
        if f not in self._thresholds:
            fo = self.forest
            nodes = np.flatnonzero((fo.feature == f) & ~fo.is_categorical & (fo.left >= 0))
            order = np.argsort(fo.threshold[nodes], kind="stable")
            self._thresholds[f] = (fo.threshold[nodes][order], nodes[order].astype(np.int64))
        return self._thresholds[f]

    def _tree(self, row: int) -> int:
        return self.boxes.tree if self.boxes is not None and row >= 0 else -1

    def _local(self, node: int) -> int:
        if node < 0:
            return -1
        t = int(np.searchsorted(self.forest.tree_offset, node, side="right") - 1)
        return int(node - self.forest.tree_offset[t])

    def tree_of(self, node: int) -> int:
        return int(np.searchsorted(self.forest.tree_offset, node, side="right") - 1)


# -- entry point ---------------------------------------------------------------------------------

def exact_ensemble_solver() -> Callable[..., Any] | None:
    """The exact solver of ensembles: the counterfactual MILP (``lumber.passes.analyses.counterfactual``),
    called with the metric's norm and weights and the search's options as :class:`CounterfactualOptions`."""
    return _counterfactual


def _counterfactual(forest: Forest, x: Any, target: Any = None, constraints: Any = None, **options: Any
                    ) -> CounterfactualResult:
    return solve_counterfactual(forest, x, target, constraints, options=CounterfactualOptions(**options))


def verify(result: SensitiveResult, goal: Target) -> None:
    """Every reported witness must reach its decision on the model (Forest.evaluate)."""
    ok = np.flatnonzero(result.reachable)
    result.verified = np.zeros(len(result), dtype=bool)
    if ok.size:
        got = goal_decisions(result.forest, result.forest.evaluate(result.point[ok]), goal)
        result.verified[ok] = got == result.target_group[ok]
    for i in ok[~result.verified[ok]]:
        result.messages[int(i)] = "witness point NOT confirmed by the model"


__all__ = ["project_tree", "leaf_distances", "decision_labels", "decision_messages", "goal_decisions",
           "check_goal", "TestExtractor", "exact_ensemble_solver", "verify"]
