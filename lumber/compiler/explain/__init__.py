"""What every explainer needs, resolved once: :class:`ExplanationRequest` and the source-model verifier."""

from .request import (
    ConstraintsLike, ExplanationRequest, explainer_options, explanation_request, parse_scale, resolve_constraints,
    warn_positional,
)
from .source import SourcePredictor, source_predictor

__all__ = ["ConstraintsLike", "ExplanationRequest", "SourcePredictor", "explainer_options", "explanation_request",
           "parse_scale",
           "resolve_constraints", "source_predictor", "warn_positional"]
