"""The explainers as analysis passes: ``counterfactual``, ``sensitive-tests`` and ``contributions``.

Each pass is its explainer's options dataclass (its fields are the options, settable in pipeline text:
``sensitive-tests{norm=l1,time-limit=5}``) and explains the rows ``data.cases`` of the pipeline data,
under ``data.constraints`` (a :class:`lumber.ir.Constraints`) toward ``data.target``, with ``data.X_train``
as the reference rows. ``lumber.sensitive_tests`` and ``lumber.contributions`` resolve a model object and
their keywords into these inputs and run the pass; ``lumber.counterfactual`` adds what needs the model
object itself (plausibility under an isolation forest it fits, verification on the source library).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from lumber.ir import CompileError, Constraints, Forest, Target
from lumber.ir.decision import resolve_target

from ..base import Analysis, PassContext
from .contributions import Contributions, contributions
from .counterfactual import CounterfactualOptions, CounterfactualResult, solve_counterfactual
from .counterfactual.reference import DECIDE_FROM, Reference
from .metrics import build_metric, split_for_sensitive
from .sensitive import SensitiveOptions, sensitive_tests
from .sensitive_results import SensitiveResult


def _rows(ir: Forest, ctx: PassContext, pass_text: str, why: str) -> tuple[Any, Constraints | None, Any]:
    data = ctx.require(pass_text, "cases", why=why)
    if data.constraints is not None and not isinstance(data.constraints, Constraints):
        raise CompileError(f"pass '{pass_text}' takes data['constraints'] as a lumber.Constraints, "
                           f"not {type(data.constraints).__name__}", "lumber.parse_constraints(text_or_file)")
    reference = None if data.X_train is None else ir.prepare_input(data.X_train)
    return data.cases, data.constraints, reference


@dataclass(frozen=True, kw_only=True)
class Counterfactuals(CounterfactualOptions, Analysis[Forest, list[CounterfactualResult]]):
    """``counterfactual``: the cheapest change of every case that the forest decides as ``data.target``."""

    name: ClassVar[str] = "counterfactual"

    def compute(self, ir: Forest, ctx: PassContext) -> list[CounterfactualResult]:
        cases, cons, R = _rows(ir, ctx, self.pipeline_text(), "counterfactuals are sought for these rows")
        if self.isolation_forest is not None or self.contamination is not None or (
                cons is not None and cons.plausibility is not None):
            raise CompileError("plausibility fits an isolation forest on the model's own decisions, which "
                               "lumber.counterfactual does", "call lumber.counterfactual(model, x, ...)")
        X = ir.prepare_input(cases)
        ref = Reference.of(ir, R, decide=len(X) >= DECIDE_FROM)
        opts = self.options_as(CounterfactualOptions)
        target = ctx.data.target if ctx.data is not None else None
        return [solve_counterfactual(ir, x, target, cons, options=opts, reference=ref) for x in X]


@dataclass(frozen=True, kw_only=True)
class SensitiveTests(SensitiveOptions, Analysis[Forest, SensitiveResult]):
    """``sensitive-tests``: how far each case is from the decision surface, and along which features.

    The constraints' per-feature rules, norm and scale apply (they win over the options); the statements
    that tie features together are listed in ``result.not_applied``."""

    name: ClassVar[str] = "sensitive-tests"

    def compute(self, ir: Forest, ctx: PassContext) -> SensitiveResult:
        cases, cons, R = _rows(ir, ctx, self.pipeline_text(), "sensitive tests are computed for these rows")
        applied, not_applied = split_for_sensitive(cons if cons is not None else Constraints())
        target = ctx.data.target if ctx.data is not None else None
        goal = target if isinstance(target, Target) or target is None else resolve_target(
            ir, target, explainer="sensitive tests")
        metric = build_metric(ir, applied, norm=self.norm, scale=self.scale, reference=R, weights=self.weights,
                              domains=self.domains)
        milp_domains = self.domains if ir.n_trees > 1 and self.method in ("auto", "milp") else None
        result = sensitive_tests(ir, cases, metric, goal if goal is not None else Target(), method=self.method,
                                 time_limit=self.time_limit, search=self.search, domains=milp_domains)
        result.not_applied = not_applied
        return result


@dataclass(frozen=True)
class RowContributions(Analysis[Forest, Contributions]):
    """``contributions``: each feature's exact Shapley share of each case's margin."""

    name: ClassVar[str] = "contributions"
    game: Literal["path", "interventional"] = "path"
    """``path``: path-dependent (TreeSHAP, node covers); ``interventional``: against the ``X_train`` rows."""

    def __post_init__(self) -> None:
        if self.game not in ("path", "interventional"):
            raise CompileError(f"game must be 'path' or 'interventional', got {self.game!r}")

    def compute(self, ir: Forest, ctx: PassContext) -> Contributions:
        data = ctx.require(self.pipeline_text(), "cases", why="contributions are computed for these rows")
        if self.game == "interventional":
            ctx.require(self.pipeline_text(), "X_train", why="interventional values average over these rows")
        return contributions(ir, data.cases, data.X_train if self.game == "interventional" else None)


__all__ = ["Counterfactuals", "RowContributions", "SensitiveTests"]
