"""One explanation request: everything the explainers need, resolved once.

``lumber.counterfactual``, ``lumber.sensitive_tests`` and
``lumber.counterfactual_rules`` (and the CLI's explain, report and batch paths)
all start from an :class:`ExplanationRequest`: the lowered model and its
source-library predictor, the schema (and per-feature domains), the constraints
from any accepted form, the target, the norm and scale (parsed once by
:meth:`Norm.parse <lumber.ir.Norm.parse>` / :meth:`Scale.parse <lumber.ir.Scale.parse>`)
and the reference rows. Constraints override keywords: a norm,
scale or target stated in the constraints wins over the keyword.

Build one with :func:`explanation_request` and pass it where a model goes;
fields the request leaves unset (``None``) are filled by each call's keywords.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Mapping, Sequence, TypeVar

import numpy as np
import numpy.typing as npt

from lumber.ir import (
    ArrayLike, Constraints, Feature, Forest, InputDataError, ModelLike, Norm, ObliviousEnsemble, Polynomial, Scale,
    Schema, Target, TargetLike,
)
from lumber.ir.decision import check_cutoff, resolve_target
from lumber.ir.domains import Domains, domains_for
from lumber.compiler.dsl import parse_constraints, refine_schema
from lumber.compiler.frontends import load
from lumber.ir.binding import warn_if_positional

from .source import SourcePredictor, source_predictor

FloatArray = npt.NDArray[np.float64]
OptionsT = TypeVar("OptionsT")
ScaleLike = Scale | str | Mapping[str, float] | Sequence[float] | FloatArray | None
"""A named scaling or explicit per-feature spreads (array, or mapping feature -> spread)."""

ConstraintsLike = Constraints | str | Path | Mapping[str, Any] | None
"""A Constraints object, a constraint file or text, or a mapping for ``Constraints.from_mapping``."""


@dataclass(frozen=True, eq=False)
class ExplanationRequest:
    """The resolved inputs of an explanation (see module docstring)."""

    model: ModelLike
    """What the user passed: a fitted model object, a model file or a Forest."""
    forest: Forest
    """The model lowered to the IR (schema refined by ``features`` when given)."""
    predictor: SourcePredictor | None
    """The source library's own ``predict`` (boosters included); None for a Forest or a file."""
    constraints: Constraints | None = None
    """Actionability, costs and settings; None when none were given."""
    target: Any = None
    """The target as the user gave it (the constraints' own target applied): a label, labels,
    ``(lo, hi)``, a :class:`~lumber.ir.Target` or None. :meth:`target_set` resolves it per case; a
    threshold target's cutoff is already the forest's decision rule."""
    norm: Norm | None = None
    """None: each explainer's default (l1 for counterfactuals, l2 for sensitive tests)."""
    scale: Scale | Mapping[str, float] | FloatArray | None = None
    """A named scaling (never ``Scale.NONE``: that is None) or explicit per-feature spreads."""
    reference: FloatArray | None = None
    """Reference (training) rows, prepared in the model's feature space."""
    domains: Domains | None = None
    """What values a person could give each feature (kind, bounds, resolution, one-hot groups), from
    the constraints, the schema and the reference rows (:func:`lumber.ir.domains.domains_for`); every
    explainer of the request reads these same domains."""

    @property
    def schema(self) -> Schema:
        return self.forest.schema

    @property
    def rules(self) -> Constraints:
        """The constraints, empty when none were given."""
        return self.constraints if self.constraints is not None else Constraints()

    def norm_or(self, default: Norm | str) -> Norm:
        return self.norm if self.norm is not None else Norm.parse(default)

    def target_set(self, current: float | None = None, *, explainer: str = "explanations") -> Target:
        """The decisions sought for a case whose current decision is ``current`` (a class index)."""
        return resolve_target(self.forest, self.target, current, explainer=explainer)

    def with_(self, **changes: Any) -> "ExplanationRequest":
        return replace(self, **changes)

    def filled(self, *, target: Any = None, norm: Norm | str | None = None, scale: ScaleLike = None,
               reference: Any = None) -> "ExplanationRequest":
        """This request with its unset fields taken from a call's keywords."""
        changes: dict[str, Any] = {}
        if self.target is None and target is not None:
            changes["target"] = target
            forest = with_decision_rule(self.forest, target)
            if forest is not self.forest:
                changes["forest"] = forest
                changes["predictor"] = None if self.predictor is None else source_predictor(self.model, forest)
        if self.norm is None and norm is not None:
            changes["norm"] = Norm.parse(norm)
        if self.scale is None and scale is not None:
            changes["scale"] = parse_scale(scale)
        if self.reference is None and reference is not None:
            changes["reference"] = self.forest.prepare_input(reference)
            changes["domains"] = domains_for(self.forest, self.constraints, changes["reference"])
        return replace(self, **changes) if changes else self


def explanation_request(model: ModelLike | ExplanationRequest, *, constraints: ConstraintsLike = None,
                        target: TargetLike = None,
                        norm: Norm | str | None = None, scale: ScaleLike = None, reference: ArrayLike | None = None,
                        features: Sequence[Feature] | None = None, verify: bool = True,
                        forest: Forest | None = None) -> ExplanationRequest:
    """Resolve a model and the explanation options once.

    Parameters
    ----------
    model
        A fitted model object (scikit-learn, LightGBM, XGBoost, CatBoost, boosters included),
        a model file, a Forest, or an :class:`ExplanationRequest` (returned with its unset
        fields filled from the keywords).
    constraints
        A :class:`~lumber.ir.Constraints`, a constraint file or text (``lumber.parse_constraints``),
        or a mapping for ``Constraints.from_mapping``; its norm, scale and target override the keywords.
    target, norm, scale, reference
        Defaults the constraints may override; ``reference`` rows are prepared once.
    features
        Feature kinds and category labels for models that record none.
    verify
        Keep the source model's own predict to re-check every explanation.
    forest
        ``model`` already lowered (batch workers reuse it instead of loading the model again).
    """
    if isinstance(model, ExplanationRequest):
        if constraints is not None or features is not None:
            raise InputDataError("constraints and features belong to the request already",
                                 "build the request with them: explanation_request(model, constraints=...)")
        req = model if verify else replace(model, predictor=None)
        return req.filled(target=target, norm=norm, scale=scale, reference=reference)
    if forest is None:
        forest = load(model)
    if features is not None:
        forest = forest.replace(schema=refine_schema(forest.schema, features))
    cons = resolve_constraints(constraints, forest.schema)
    if cons is not None:
        forest = forest.replace(schema=cons.named(forest.schema))  # class names and value words, for people
        norm, scale, target = cons.settings(norm, scale, target)
    forest = with_decision_rule(forest, target)
    warn_positional(model, forest, reference, "reference")
    R = None if reference is None else forest.prepare_input(reference)
    return ExplanationRequest(
        model=model, forest=forest, predictor=source_predictor(model, forest) if verify else None,
        constraints=cons, target=target, norm=None if norm is None else Norm.parse(norm), scale=parse_scale(scale),
        reference=R, domains=domains_for(forest, cons, R),
    )


def with_decision_rule(forest: Forest, target: Any) -> Forest:
    """``forest`` deciding by the cutoff of a threshold target (``target probability of class 1 <= 0.3``):
    its ``predict``, every explainer and the source predictor built from it follow the user's rule."""
    if not isinstance(target, Target) or target.cutoff is None:
        return forest
    check_cutoff(forest.schema, target.cutoff, target.label if target.below is not None else None)
    return forest.replace(schema=target.apply(forest.schema))


def warn_positional(model: Any, forest: Forest | Any, data: Any, what: str) -> None:
    """Warn when a user's model with feature names gets an array without any (columns by position).

    Lowered IR (a Forest, a Polynomial) and requests already built take arrays in the model's feature
    order by definition: the CLI, the build and batch workers pass rows they have bound by name."""
    if not isinstance(model, (ExplanationRequest, Forest, Polynomial, ObliviousEnsemble)):
        warn_if_positional(forest.schema.feature_names, data, what)


def resolve_constraints(constraints: ConstraintsLike | Any, schema: Schema) -> Constraints | None:
    """Constraints from any accepted form: None, a Constraints, a file or text, or a mapping.

    Every rule must name a feature of the model.
    """
    if constraints is None:
        return None
    if isinstance(constraints, (str, Path)):
        return parse_constraints(constraints, schema=schema)  # checked against the schema already
    return Constraints.coerce(constraints).check_features(schema.feature_names)


def parse_scale(scale: ScaleLike) -> Scale | Mapping[str, float] | FloatArray | None:
    """A named scaling (``Scale.NONE`` becomes None) or explicit spreads (kept as given, checked later)."""
    if scale is None:
        return None
    if isinstance(scale, (Scale, str)):
        s = Scale.parse(scale)
        return None if s == Scale.NONE else s
    if isinstance(scale, Mapping):
        return scale
    return np.asarray(scale, dtype=np.float64)



def explainer_options(options: Any, cls: type[OptionsT], call: str) -> OptionsT:
    """``options`` when it is a ``cls`` (an explainer's options dataclass), ``cls()`` for None; anything else is
    an InputDataError naming the class (``call`` shows how to pass one)."""
    if options is None:
        return cls()
    if not isinstance(options, cls):
        raise InputDataError(f"options must be a lumber.{cls.__name__}, got {type(options).__name__}",
                             f"{call}(..., options=lumber.{cls.__name__}(...))")
    return options

__all__ = ["ConstraintsLike", "ExplanationRequest", "ScaleLike", "explainer_options", "explanation_request",
           "parse_scale", "resolve_constraints", "warn_positional"]
