"""lumber's intermediate representations: data types, validation, reference evaluators.

``ir`` imports nothing else from the package; every other layer builds on it.
"""

from .accepts import ArrayLike, CasesLike, ModelLike, TargetLike, WeightsLike
from .atomic import OutputError, atomic_open, atomic_write_bytes, atomic_write_text
from .constraints import (
    Bound, Constraints, Direction, Event, FeatureEvent, FeatureRule, Implication,
    LinearRelation, Membership, Norm, OneHotGroup, Plausibility, Scale,
)
from .diagnostics import (
    CompileError, Diagnostic, DiagnosticSink, InputDataError, IRLocation, LumberError,
    ModelFormatError, Severity, SourceSpan, UnsupportedModelError, ValidationError,
)
from .decision import Target, resolve_target
from .forest import Forest
from .oblivious import ObliviousEnsemble
from .polynomial import ConditionKind, Polynomial
from .schema import CategoryRule, Cutoff, Feature, FeatureKind, PostTransform, Schema, Task, default_features
from .serialize import load_ir, save_ir

__all__ = [
    "ArrayLike", "CasesLike", "ModelLike", "TargetLike", "WeightsLike",
    "Bound", "CategoryRule", "Cutoff", "CompileError", "ConditionKind", "Constraints", "Diagnostic", "DiagnosticSink", "Direction",
    "Event", "Feature", "FeatureEvent", "FeatureKind", "FeatureRule", "Forest", "IRLocation", "Implication",
    "InputDataError", "LinearRelation", "LumberError", "Membership", "ModelFormatError", "Norm", "ObliviousEnsemble", "OneHotGroup",
    "OutputError",
    "Plausibility", "Polynomial", "PostTransform", "Scale", "Schema", "Severity", "SourceSpan", "Target", "Task",
    "UnsupportedModelError", "ValidationError", "atomic_open", "atomic_write_bytes", "atomic_write_text",
    "default_features", "load_ir", "resolve_target", "save_ir",
]
