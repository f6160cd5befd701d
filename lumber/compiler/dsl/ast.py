"""Syntax tree of a constraint file: what was written, where, before any meaning is given.

The parser builds these nodes; the checker (``check.py``) gives them meaning
against a schema and lowers them to :class:`lumber.ir.Constraints`; the
formatter (``printer.py``) prints them back canonically. Literals keep their
source text so formatting never changes a number. Every node carries a
:class:`~lumber.ir.SourceSpan` for diagnostics.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Union

from lumber.ir import SourceSpan

# -- leaves ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Name:
    """A feature name; ``quoted`` names (`` `x>=1` ``) are taken literally, never as sugar."""

    text: str
    quoted: bool
    span: SourceSpan


@dataclass(frozen=True)
class Num:
    """A number literal, kept as written (``1000``, ``0.1``, ``1e-3``)."""

    text: str
    span: SourceSpan

    @property
    def value(self) -> float:
        return float(self.text)

    @property
    def is_int(self) -> bool:
        return self.text.isdigit()


@dataclass(frozen=True)
class Label:
    """A category label, class label or parameter value: a bare word, a "string" or a number."""

    kind: str
    """``"name"``, ``"string"`` or ``"number"``."""
    text: str
    """The word, the unescaped string, or the number's source text (with its sign)."""
    span: SourceSpan

    @property
    def number(self) -> float:
        return float(self.text)


# -- linear arithmetic -------------------------------------------------------------------


@dataclass(frozen=True)
class Ref:
    """A feature reference: ``X`` (``form="plain"``; sugar ``X0``/``dX`` resolved later),
    ``orig(X)`` or ``delta(X)``."""

    name: Name
    form: str
    span: SourceSpan


@dataclass(frozen=True)
class Neg:
    operand: "Expr"
    span: SourceSpan
    plus: bool = False
    """Unary ``+`` (kept so formatting does not drop it)."""


@dataclass(frozen=True)
class Paren:
    inner: "Expr"
    span: SourceSpan


@dataclass(frozen=True)
class Chain:
    """``first op1 t1 op2 t2 ...`` with ops all in ``+ -`` (a sum) or all in ``* /`` (a product)."""

    first: "Expr"
    rest: tuple[tuple[str, "Expr"], ...]
    span: SourceSpan


Expr = Union[Num, Ref, Neg, Paren, Chain]

# -- feature clauses ---------------------------------------------------------------------


@dataclass(frozen=True)
class CImmutable:
    span: SourceSpan


@dataclass(frozen=True)
class CDirection:
    direction: str
    """``"increase"`` or ``"decrease"``."""
    span: SourceSpan


@dataclass(frozen=True)
class CBetween:
    low: Expr
    high: Expr
    span: SourceSpan


@dataclass(frozen=True)
class CCompare:
    op: str
    value: Expr
    span: SourceSpan


@dataclass(frozen=True)
class CIn:
    labels: tuple[Label, ...]
    span: SourceSpan


@dataclass(frozen=True)
class COrder:
    labels: tuple[Label, ...]
    span: SourceSpan


@dataclass(frozen=True)
class CCost:
    side: str | None
    """``None`` (both directions), ``"up"`` or ``"down"``."""
    amount: Num
    per: Num | None
    span: SourceSpan


@dataclass(frozen=True)
class CKind:
    """``integer`` / ``binary`` / ``continuous``: which values the feature takes."""

    kind: str
    span: SourceSpan


@dataclass(frozen=True)
class CStep:
    """``step 1``: the feature's resolution (every change is a whole number of steps)."""

    amount: Num
    span: SourceSpan


@dataclass(frozen=True)
class CMeans:
    """``1 means "payment delayed 1+ month"``: what a value of the feature means to people (display only)."""

    value: Label
    words: Label
    span: SourceSpan


Clause = Union[CImmutable, CDirection, CBetween, CCompare, CIn, COrder, CCost, CKind, CStep, CMeans]

# -- conditions --------------------------------------------------------------------------


@dataclass(frozen=True)
class EventCond:
    name: Name
    event: str
    """``increases``, ``decreases``, ``changes`` or ``is unchanged``."""
    span: SourceSpan


@dataclass(frozen=True)
class MemberCond:
    subject: Expr
    labels: tuple[Label, ...]
    span: SourceSpan


@dataclass(frozen=True)
class Relation:
    lhs: Expr
    op: str
    rhs: Expr
    span: SourceSpan


Cond = Union[EventCond, MemberCond, Relation]

# -- statements --------------------------------------------------------------------------


@dataclass(frozen=True)
class Include:
    path: str
    span: SourceSpan


@dataclass(frozen=True)
class NameList:
    """``immutable A, B`` / ``increase A, B`` / ``decrease A, B``."""

    keyword: str
    names: tuple[Name, ...]
    span: SourceSpan


@dataclass(frozen=True)
class FeatureStmt:
    name: Name
    clauses: tuple[Clause, ...]
    span: SourceSpan


@dataclass(frozen=True)
class RelationStmt:
    relation: Relation
    span: SourceSpan


@dataclass(frozen=True)
class ImplicationStmt:
    condition: Cond
    then: tuple[Cond, ...]
    span: SourceSpan


@dataclass(frozen=True)
class ChangesStmt:
    op: str
    value: Expr
    span: SourceSpan


@dataclass(frozen=True)
class Setting:
    """``norm WORD`` / ``scale WORD``."""

    keyword: str
    word: str
    word_span: SourceSpan
    span: SourceSpan


@dataclass(frozen=True)
class Param:
    name: str
    value: Label
    span: SourceSpan


@dataclass(frozen=True)
class PlausibleStmt:
    method: str
    method_span: SourceSpan
    params: tuple[Param, ...] | None
    """``None`` when written without parentheses."""
    span: SourceSpan


@dataclass(frozen=True)
class OneHotStmt:
    """``onehot Race = {Race_A, Race_B}``: columns that one-hot encode one variable."""

    name: Name
    members: tuple[Name, ...]
    span: SourceSpan


@dataclass(frozen=True)
class ClassNames:
    """``class 0 means paid, 1 means default``: what each class means to people (display only)."""

    names: tuple[tuple[Label, Label], ...]
    span: SourceSpan


@dataclass(frozen=True)
class TargetClass:
    label: Label
    span: SourceSpan


@dataclass(frozen=True)
class TargetRange:
    """``target between a and b`` (``op is None``) or ``target <= b`` / ``target >= a``."""

    op: str | None
    low: Label | None
    high: Label | None
    span: SourceSpan


@dataclass(frozen=True)
class TargetThreshold:
    """``target probability of class 1 <= 0.3`` (``score`` is ``probability`` or ``margin``; the words
    are checked with their positions, ``of_word`` must be ``of``)."""

    score: str
    score_span: SourceSpan
    of_word: str
    of_span: SourceSpan
    label: Label
    op: str
    value: Label
    span: SourceSpan


Statement = Union[Include, NameList, FeatureStmt, RelationStmt, ImplicationStmt, ChangesStmt, Setting,
                  PlausibleStmt, TargetClass, TargetRange, TargetThreshold, OneHotStmt, ClassNames]


@dataclass(frozen=True)
class Comment:
    text: str
    line: int
    column: int
    own_line: bool
    """True when nothing but whitespace precedes it on its line."""


@dataclass
class Program:
    """One parsed file: its statements in order, its comments and its text."""

    file: str | None
    text: str
    statements: list[Statement] = field(default_factory=list)
    comments: list[Comment] = field(default_factory=list)

    @property
    def lines(self) -> list[str]:
        return split_lines(self.text)


def split_lines(text: str) -> list[str]:
    """Lines as the parser counts them: only ``\n`` ends a line (``str.splitlines`` would also split
    on form feeds and other separators and shift every line number after them)."""
    return [ln[:-1] if ln.endswith("\r") else ln for ln in text.split("\n")]
