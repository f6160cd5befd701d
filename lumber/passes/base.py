"""Pass base classes and the context they run in.

A pass is a frozen dataclass whose fields are its options (xDSL's ``ModulePass``):

```python
@dataclass(frozen=True)
class PruneMonomials(Transform[Polynomial, Polynomial]):
    name: ClassVar[str] = "prune"
    alpha: float | Literal["auto"] = "auto"

    def run(self, ir: Polynomial, ctx: PassContext) -> Polynomial: ...
```

The type parameters say which IR a pass takes and gives; the pass manager
(:mod:`lumber.passes.manager`) checks a whole pipeline against them before
running anything. A :class:`Transform` maps IR to IR and does nothing else; an
:class:`Analysis` computes a result, caches it in the :class:`PassContext` by
(analysis, IR object) and returns the IR unchanged. Neither keeps state
between calls. Option names are kebab-case in pipeline text and snake_case
fields in Python (``max-monomials`` is ``max_monomials``).
"""

from __future__ import annotations

import dataclasses
import typing
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, Mapping, Protocol, TypeVar

from lumber.ir import CompileError

In = TypeVar("In")
Out = TypeVar("Out")
R = TypeVar("R")
O = TypeVar("O")


@dataclass(frozen=True)
class PassData:
    """Data some passes need: training rows (pruning statistics, attribution, the reference rows of the
    explanations), validation rows (choosing the pruning threshold, a cascade's band), and what an
    explanation pass explains: the ``cases`` (rows), the ``constraints`` and the decision ``target``.
    Arrays or DataFrames."""

    X_train: Any = None
    y_train: Any = None
    X_valid: Any = None
    y_valid: Any = None
    cases: Any = None
    constraints: Any = None
    """A :class:`lumber.ir.Constraints` (explanation passes), or None."""
    target: Any = None
    """The decision to reach (a class label, several, or ``(lo, hi)`` for a regressor), or None: any other."""

    @staticmethod
    def coerce(data: Any) -> "PassData | None":
        """Accept ``None``, a PassData, or a mapping with ``X_train``/``y_train``/``X_valid``/
        ``y_valid`` keys or ``train=(X, y)``/``valid=(X, y)`` pairs."""
        if data is None or isinstance(data, PassData):
            return data
        if isinstance(data, Mapping):
            direct = ("X_train", "y_train", "X_valid", "y_valid", "cases", "constraints", "target")
            known = set(direct) | {"train", "valid", "validation"}
            unknown = sorted(set(map(str, data)) - known)
            if unknown:
                raise CompileError(f"unknown data key(s): {', '.join(unknown)}",
                                   f"accepted keys: {', '.join(direct)}, train=(X, y), valid=(X, y)")
            kw = {k: data[k] for k in direct if k in data}
            for key, (xk, yk) in (("train", ("X_train", "y_train")), ("valid", ("X_valid", "y_valid")),
                                  ("validation", ("X_valid", "y_valid"))):
                if key in data:
                    pair = data[key]
                    if not (isinstance(pair, (tuple, list)) and len(pair) == 2):
                        raise CompileError(f"data['{key}'] must be a pair (X, y)")
                    kw[xk], kw[yk] = pair
            return PassData(**kw)
        raise CompileError(f"data must be a PassData or a mapping, got {type(data).__name__}")


@dataclass
class PassReport:
    """What a pass did, in numbers (pruning: kept/dropped monomials, metric before/after)."""

    pass_name: str
    summary: str
    metrics: dict[str, Any] = field(default_factory=dict)

    def render(self) -> str:
        return f"{self.pass_name}: {self.summary}"


@dataclass
class PassTiming:
    pass_text: str
    seconds: float
    ir_in: str
    ir_out: str


class Instrument(Protocol):
    """Hooks the pass manager calls around every pass (TVM's pass instruments)."""

    def before_pass(self, p: "Pass", ir: Any, ctx: "PassContext") -> None: ...

    def after_pass(self, p: "Pass", ir_in: Any, ir_out: Any, ctx: "PassContext") -> None: ...


@dataclass
class PassContext:
    """Shared state of one pipeline run: data, instruments, reports, timings, analysis cache.

    Analysis results are cached by (analysis, IR object): IR is immutable, so a
    transform that returns its input keeps every result valid and one that
    returns a new object invalidates them.
    """

    data: PassData | None = None
    instruments: list[Instrument] = field(default_factory=list)
    reports: list[PassReport] = field(default_factory=list)
    timings: list[PassTiming] = field(default_factory=list)
    results: dict[str, Any] = field(default_factory=dict)
    """Latest result of each analysis that ran in the pipeline, by pass name."""
    source: Any = None
    """The IR the pipeline started from (``equivalence`` compares against it)."""
    _cache: dict[Any, tuple[Any, Any, Any]] = field(default_factory=dict, repr=False)

    def analysis(self, analysis: "Analysis[Any, R]", ir: Any) -> R:
        """The analysis' result on ``ir``, computed once per IR object and equal analysis (one whose options
        hold arrays or mappings is not hashable: then once per analysis object)."""
        try:
            key: Any = (analysis, id(ir))
            hash(key)
            by_value = True
        except TypeError:
            key, by_value = (id(analysis), id(ir)), False
        hit = self._cache.get(key)
        if hit is not None and hit[0] is ir and (by_value or hit[1] is analysis):
            return hit[2]  # type: ignore[no-any-return]
        result = analysis.compute(ir, self)
        self._cache[key] = (ir, analysis, result)
        return result

    def report(self, report: PassReport) -> None:
        self.reports.append(report)

    def require(self, pass_text: str, *fields_: str, why: str) -> PassData:
        """The data fields a pass needs, or a CompileError saying how to pass them."""
        data = self.data or PassData()
        missing = [f for f in fields_ if getattr(data, f) is None]
        if missing:
            raise CompileError(
                f"pass '{pass_text}' needs {', '.join(missing)} ({why})",
                "Python: lumber.run(model, passes, data={'train': (X, y), 'valid': (X, y)}); "
                "CLI: lumber compile MODEL --passes ... --train TRAIN.csv --valid VALID.csv --label COLUMN")
        return data


class Pass(ABC):
    """Base of transforms and analyses. Subclasses are frozen dataclasses.

    ``takes``/``gives`` are derived from the type parameters of
    ``Transform[In, Out]`` / ``Analysis[In, Result]``.
    """

    name: ClassVar[str]
    takes: ClassVar[type]
    gives: ClassVar[type]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for base in getattr(cls, "__orig_bases__", ()):
            origin = typing.get_origin(base)
            if origin is not None and origin.__name__ in ("Transform", "Analysis") and origin.__module__ == __name__:
                args = typing.get_args(base)
                if args and isinstance(args[0], type):
                    cls.takes = args[0]
                    cls.gives = args[1] if origin.__name__ == "Transform" and isinstance(args[1], type) else args[0]

    @abstractmethod
    def apply(self, ir: Any, ctx: PassContext) -> Any:
        """Run on ``ir``; return the IR for the next pass."""

    @classmethod
    def option_fields(cls) -> dict[str, dataclasses.Field[Any]]:
        """Options by kebab-case name."""
        if not dataclasses.is_dataclass(cls):
            return {}
        return {f.name.replace("_", "-"): f for f in dataclasses.fields(cls) if f.init}

    def options_as(self, cls: type[O]) -> O:
        """This pass's fields that ``cls`` declares, as a ``cls``: the options dataclass a pass
        extends (``FitOptions``, ``CounterfactualOptions``, ``SensitiveOptions``), for the functions that take it."""
        return cls(**{f.name: getattr(self, f.name) for f in dataclasses.fields(cls)  # type: ignore[arg-type]
                      if f.init})

    def pipeline_text(self) -> str:
        """This pass as pipeline text, options that differ from their default only."""
        parts = []
        for opt, f in self.option_fields().items():
            v = getattr(self, f.name)
            default = f.default if f.default is not dataclasses.MISSING else (
                f.default_factory() if f.default_factory is not dataclasses.MISSING else dataclasses.MISSING)
            if v != default:
                parts.append(f"{opt}={format_option(v)}")
        return self.name + ("{" + ",".join(parts) + "}" if parts else "")


def format_option(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return repr(v)
    return str(v)


class Transform(Pass, Generic[In, Out]):
    """IR -> IR; never changes its input."""

    @abstractmethod
    def run(self, ir: In, ctx: PassContext) -> Out: ...

    def apply(self, ir: Any, ctx: PassContext) -> Any:
        return self.run(ir, ctx)


class Analysis(Pass, Generic[In, R]):
    """IR (+ data) -> a result; the IR passes through unchanged."""

    @abstractmethod
    def compute(self, ir: In, ctx: PassContext) -> R: ...

    def apply(self, ir: Any, ctx: PassContext) -> Any:
        ctx.results[self.name] = ctx.analysis(self, ir)
        return ir


def describe_ir(ir: Any) -> str:
    """One-line shape of an IR object for timing tables and errors."""
    name = type(ir).__name__
    if hasattr(ir, "n_monomials"):
        return f"{name}({ir.n_monomials:,} monomials, {ir.n_conditions:,} conditions)"
    if hasattr(ir, "n_trees") and hasattr(ir, "n_nodes"):
        return f"{name}({ir.n_trees:,} trees, {ir.n_nodes:,} nodes)"
    if hasattr(ir, "n_trees"):
        return f"{name}({ir.n_trees:,} trees)"
    return name


def article(type_name: str) -> str:
    return ("an " if type_name[:1].lower() in "aeiou" else "a ") + type_name


__all__ = ["Analysis", "Instrument", "Pass", "PassContext", "PassData", "PassReport", "PassTiming",
           "Transform", "article", "describe_ir", "format_option"]
