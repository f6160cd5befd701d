"""The Polynomial IR: a tree ensemble as a sum of monomials of split indicators (MonoForest).

A condition is a 0/1 function of one feature; a monomial is a product of
conditions; the model is ``bias + sum_M weight[M] * prod_{c in M} c(x)``.
This is the normal form of Kuralenok et al. (NeurIPS 2019), Theorem 1: for a
fixed condition set the weights are unique, so two models compute the same
function iff their canonical polynomials agree.

Missing values. The paper's indicator is ``c(x) = I{x > b}``; here it also
says what a NaN does. Per feature the conditions use one of two *NaN modes*:

* point mode: NaN behaves like a value inside one cell of the feature's
  thresholds (every split on the feature routes NaN as it routes that cell).
  Then ``GREATER`` conditions hold on NaN below that cell and fail above it
  (``cond_nan_true`` is non-increasing in the threshold) and no extra
  condition is needed: the polynomial has the paper's size.
* explicit mode: every ``GREATER`` condition is false on NaN and one
  ``MISSING`` condition ``I{x is NaN}`` carries the NaN behaviour.

In both modes the per-feature functions ``1, c_1, ..., c_m`` form a basis of
the functions that are constant on the feature's cells, which is what makes
the form unique (Theorem 1) and lets two conditions on one feature collapse
(the larger threshold devours the smaller; ``GREATER * MISSING == 0``).

Categorical features have ``EQUAL`` conditions (one per category code some
split names), ``INVALID`` (not a valid code) and ``MISSING``; the valid codes no
split names are the implicit reference cell, so again the indicators and 1 are
a basis and the form is unique.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

import numpy as np
import numpy.typing as npt

from .diagnostics import IRLocation, ValidationError
from .display import Display
from .interp import category_codes, prepare_input
from .schema import Schema
from .serialize import ir_kind, load_ir, save_ir

if TYPE_CHECKING:  # pragma: no cover
    import networkx as nx


class ConditionKind(enum.IntEnum):
    """What a condition tests; the values are part of the file format."""

    GREATER = 0
    """``x > threshold`` for non-NaN ``x`` (``x`` rounded to the input dtype); on NaN: ``cond_nan_true``."""
    MISSING = 1
    """``x is NaN``; ``threshold`` is NaN and ``cond_nan_true`` is True."""
    EQUAL = 2
    """Categorical: ``x``'s category code (under the schema's category rule) is ``threshold``; false on NaN."""
    INVALID = 3
    """Categorical: ``x`` is not NaN and not a valid category code; ``threshold`` is NaN."""


ENTRY_BUDGET = 1 << 22
"""Monomials x rows handled in one numpy step during evaluation (bounds temporaries to tens of MB)."""


@ir_kind("polynomial")
@dataclass(frozen=True, eq=False)
class Polynomial:
    """``bias + sum_M weight[M] * prod_{c in M} c(x)`` with a sorted condition table.

    Conditions are sorted by (feature, kind, threshold) and unique. Monomials
    are CSR rows of condition ids: monomial ``j`` is
    ``mono_cond[mono_offset[j]:mono_offset[j + 1]]``, strictly increasing ids,
    at most one condition per feature, degree >= 1 (the constant lives in
    ``bias``), no two monomials alike. Passes emit monomials sorted by degree
    and then by condition ids.

    schema : Schema
        The source model's schema with ``average=False``, ``accumulate_dtype="float64"``
        and ``base_score`` zero: averaging and the base score are folded into
        ``weight`` and ``bias``.
    cond_feature : int32[n_conditions]
    cond_kind : int8[n_conditions]
        :class:`ConditionKind` values.
    cond_threshold : float64[n_conditions]
        ``GREATER``: the threshold ``b`` (finite; for float32 inputs a float32 value).
        ``MISSING``: NaN.
    cond_nan_true : bool[n_conditions]
        Value of the condition when the input is NaN (the source routed NaN right).
    mono_offset : int64[n_monomials + 1]
    mono_cond : int32[nnz]
    weight : float64[n_monomials, n_outputs]
    bias : float64[n_outputs]
        Constant term: base score plus the empty monomial (divided by the tree count
        of averaged forests).

    ``evaluate`` sums in float64 in an order different from the forest's, so it
    matches ``Forest.evaluate`` to about 1e-12 relative to the model's scale
    ``sum_t max|leaf_t|``, not bit for bit; for sources that accumulate in float32
    (XGBoost) it equals the float64 sum of the leaf values.
    """

    schema: Schema
    cond_feature: npt.NDArray[np.int32]
    cond_kind: npt.NDArray[np.int8]
    cond_threshold: npt.NDArray[np.float64]
    cond_nan_true: npt.NDArray[np.bool_]
    mono_offset: npt.NDArray[np.int64]
    mono_cond: npt.NDArray[np.int32]
    weight: npt.NDArray[np.float64]
    bias: npt.NDArray[np.float64]

    ARRAY_FIELDS = (
        ("cond_feature", np.int32), ("cond_kind", np.int8), ("cond_threshold", np.float64),
        ("cond_nan_true", np.bool_), ("mono_offset", np.int64), ("mono_cond", np.int32),
        ("weight", np.float64), ("bias", np.float64),
    )

    def __post_init__(self) -> None:
        for name, dtype in self.ARRAY_FIELDS:
            a = np.ascontiguousarray(getattr(self, name), dtype=dtype).view()
            a.flags.writeable = False
            object.__setattr__(self, name, a)
        if self.weight.ndim == 1:
            w = self.weight.reshape(-1, 1)
            w.flags.writeable = False
            object.__setattr__(self, "weight", w)

    # -- shape ------------------------------------------------------------------------------

    @property
    def n_conditions(self) -> int:
        return int(self.cond_feature.shape[0])

    @property
    def n_monomials(self) -> int:
        return int(self.mono_offset.shape[0] - 1)

    @property
    def n_outputs(self) -> int:
        return self.schema.n_outputs

    @property
    def n_features(self) -> int:
        return self.schema.n_features

    @property
    def nnz(self) -> int:
        return int(self.mono_cond.shape[0])

    @cached_property
    def degree(self) -> npt.NDArray[np.int64]:
        d = np.diff(self.mono_offset)
        d.flags.writeable = False
        return d

    @property
    def max_degree(self) -> int:
        return int(self.degree.max()) if self.n_monomials else 0

    @cached_property
    def mono_of_entry(self) -> npt.NDArray[np.int64]:
        """Monomial id of every entry of ``mono_cond``."""
        a = np.repeat(np.arange(self.n_monomials, dtype=np.int64), self.degree)
        a.flags.writeable = False
        return a

    @cached_property
    def padded_ids(self) -> npt.NDArray[np.int32]:
        """``[n_monomials, max_degree]`` condition ids, padded with ``n_conditions``."""
        return padded_from_csr(self.mono_offset, self.mono_cond, self.n_conditions)

    def replace(self, **changes: Any) -> "Polynomial":
        return replace(self, **changes)

    # -- checks -----------------------------------------------------------------------------

    def validate(self) -> "Polynomial":
        """Check every documented invariant; raises ``ValidationError``. Returns self."""
        verify_polynomial(self)
        return self

    # -- semantics ----------------------------------------------------------------------------

    def prepare_input(self, X: Any) -> npt.NDArray[np.float64]:
        """Check and convert user data exactly as ``Forest.prepare_input`` does."""

        return prepare_input(self.schema, X)

    def conditions(self, X: Any) -> npt.NDArray[np.bool_]:
        """Truth of every condition on every row, ``(n, n_conditions)``."""
        return condition_matrix(self, self.prepare_input(X))

    def active(self, X: Any) -> npt.NDArray[np.bool_]:
        """Which monomials hold on which row, ``(n, n_monomials)`` (for small inputs)."""
        Xp = self.prepare_input(X)
        out = np.zeros((Xp.shape[0], self.n_monomials), dtype=bool)
        for rows, cbits in row_blocks(self, Xp):
            for monos, bits in active_chunks(self, cbits, np.arange(self.n_monomials)):
                out[rows, monos] = unpack_rows(bits, rows.stop - rows.start).T
        return out

    def evaluate(self, X: Any) -> npt.NDArray[np.float64]:
        """Raw margins: ``(n,)`` when ``n_outputs == 1``, else ``(n, n_outputs)``."""
        Xp = self.prepare_input(X)
        out = self.bias[None, :] + self.partial_sum(Xp, None, prepared=True)
        return out[:, 0] if self.n_outputs == 1 else out

    def partial_sum(self, X: Any, monomials: npt.NDArray[np.int64] | None,
                    prepared: bool = False) -> npt.NDArray[np.float64]:
        """``sum_{M in monomials} weight[M] * M(x)`` without the bias, ``(n, n_outputs)``.

        ``monomials`` is an index array (None: all). Pruning uses it to price a cut.
        """
        return self.partial_sums(X, [monomials], prepared=prepared)[0]

    def partial_sums(self, X: Any, segments: list[npt.NDArray[np.int64] | None],
                     prepared: bool = False) -> list[npt.NDArray[np.float64]]:
        """:meth:`partial_sum` for several index arrays, evaluating the conditions once."""
        Xp = X if prepared else self.prepare_input(X)
        index = [np.arange(self.n_monomials) if s is None else np.asarray(s, dtype=np.int64) for s in segments]
        outs = [np.zeros((Xp.shape[0], self.n_outputs), dtype=np.float64) for _ in index]
        for rows, cbits in row_blocks(self, Xp):
            for ix, out in zip(index, outs):
                for monos, bits in active_chunks(self, cbits, ix):
                    out[rows] += weighted_row_sums(bits, self.weight[ix[monos]], rows.stop - rows.start)
        return outs

    def support(self, X: Any, monomials: npt.NDArray[np.int64] | None = None) -> npt.NDArray[np.float64]:
        """Fraction of rows on which each monomial holds (all its conditions true)."""
        Xp = self.prepare_input(X)
        index = np.arange(self.n_monomials) if monomials is None else np.asarray(monomials, dtype=np.int64)
        hits = np.zeros(index.shape[0], dtype=np.int64)
        for _, cbits in row_blocks(self, Xp):
            for monos, bits in active_chunks(self, cbits, index, max(1, ENTRY_BUDGET // cbits.shape[1])):
                hits[monos] += np.bitwise_count(bits).sum(axis=1, dtype=np.int64)
        return hits / max(Xp.shape[0], 1)

    def predict_proba(self, X: Any) -> npt.NDArray[np.float64]:
        return self.schema.proba(self.evaluate(X))

    def predict(self, X: Any) -> npt.NDArray[Any]:
        return self.schema.decide(self.evaluate(X))

    # -- editing ------------------------------------------------------------------------------

    def select(self, keep: npt.NDArray[Any]) -> "Polynomial":
        """The polynomial restricted to some monomials (bool mask or sorted index);
        conditions no kept monomial uses are dropped."""
        keep = np.asarray(keep)
        index = np.flatnonzero(keep) if keep.dtype == bool else np.asarray(keep, dtype=np.int64)
        ids = self.padded_ids[index]
        return _assemble(self.schema, self.cond_feature, self.cond_kind, self.cond_threshold, self.cond_nan_true,
                         ids, self.weight[index], self.bias, sort=False)

    # -- storage and views ------------------------------------------------------------------

    def save(self, path: str | Path) -> None:
        save_ir(self, path)

    @staticmethod
    def load(path: str | Path) -> "Polynomial":
        return load_ir(path, Polynomial)  # type: ignore[no-any-return]

    def describe_condition(self, c: int) -> str:
        """``age > 30.5``, ``age > 30.5 or missing``, ``age is missing``."""
        name = self.schema.features[int(self.cond_feature[c])].name
        kind = self.cond_kind[c]
        if kind == ConditionKind.MISSING:
            return f"{name} is missing"
        if kind == ConditionKind.EQUAL:
            code = int(self.cond_threshold[c])
            cats = self.schema.features[int(self.cond_feature[c])].categories
            return f"{name} = {cats[code]!r}" if cats is not None and code < len(cats) else f"{name} = {code}"
        if kind == ConditionKind.INVALID:
            return f"{name} is not a valid category"
        i = int(self.cond_feature[c])
        text = f"{name} > {self._display.threshold(i, float(self.cond_threshold[c]))}"
        return text + " or missing" if self.cond_nan_true[c] else text

    def threshold_cuts(self, i: int) -> npt.NDArray[np.float64]:
        """Sorted finite thresholds of feature ``i``'s ``x > t`` conditions (the model's cells)."""
        t = self.cond_threshold[(self.cond_feature == i) & (self.cond_kind == ConditionKind.GREATER)]
        return np.unique(t[np.isfinite(t)])

    @cached_property
    def _display(self) -> Any:
        """Thresholds for people: the shortest decimal splitting the model's cells as the threshold does
        (``Age > 20.5``, not the model file's ``20.500000000000004``); ``cond_threshold`` keeps the exact one."""

        return Display(self)  # type: ignore[arg-type]

    def describe_monomial(self, j: int) -> str:
        conds = self.mono_cond[self.mono_offset[j]:self.mono_offset[j + 1]]
        w = ", ".join(f"{v:.6g}" for v in self.weight[j])
        return f"[{w}] * " + " * ".join(f"[{self.describe_condition(int(c))}]" for c in conds)

    def statistics(self) -> dict[str, Any]:
        """Monomials by degree, conditions per feature, sizes (``lumber inspect`` style)."""
        by_degree = np.bincount(self.degree, minlength=self.max_degree + 1) if self.n_monomials else np.zeros(1)
        per_feature = np.bincount(self.cond_feature, minlength=self.n_features)
        nbytes = sum(getattr(self, n).nbytes for n, _ in self.ARRAY_FIELDS)
        return {
            "conditions": self.n_conditions,
            "missing_conditions": int((self.cond_kind == ConditionKind.MISSING).sum()),
            "category_conditions": int((self.cond_kind >= ConditionKind.EQUAL).sum()),
            "monomials": self.n_monomials,
            "entries": self.nnz,
            "max_degree": self.max_degree,
            "mean_degree": float(self.degree.mean()) if self.n_monomials else 0.0,
            "monomials_by_degree": {int(d): int(c) for d, c in enumerate(by_degree) if c},
            "conditions_per_feature": {self.schema.features[i].name: int(c)
                                       for i, c in enumerate(per_feature) if c},
            "outputs": self.n_outputs,
            "memory_bytes": int(nbytes),
        }

    summary = statistics

    def to_networkx(self) -> "nx.Graph":
        """Bipartite view: condition nodes ``("c", i)`` and monomial nodes ``("m", j)``."""
        import networkx as nx

        g = nx.Graph()
        for c in range(self.n_conditions):
            g.add_node(("c", c), label=self.describe_condition(c), feature=int(self.cond_feature[c]))
        for j in range(self.n_monomials):
            g.add_node(("m", j), weight=self.weight[j].tolist())
        g.add_edges_from((("m", int(j)), ("c", int(c))) for j, c in zip(self.mono_of_entry, self.mono_cond))
        return g


# -- evaluation engine: condition bitsets over rows, AND per monomial ------------------------


def condition_matrix(poly: Polynomial, Xp: npt.NDArray[np.float64]) -> npt.NDArray[np.bool_]:
    """``(n, n_conditions)`` truth table of prepared rows (every condition evaluated once per row)."""
    xs = Xp[:, poly.cond_feature]
    nan = np.isnan(xs)
    with np.errstate(invalid="ignore"):
        gt = (xs > poly.cond_threshold[None, :]) | (nan & poly.cond_nan_true[None, :])
    missing = (poly.cond_kind == ConditionKind.MISSING)[None, :]
    out = np.where(missing, nan, gt)
    cat = np.flatnonzero(poly.cond_kind >= ConditionKind.EQUAL)
    if cat.size:
        codes = category_codes(xs[:, cat], poly.schema.category_rule)
        equal = poly.cond_kind[cat] == ConditionKind.EQUAL
        out[:, cat] = np.where(equal[None, :], codes == poly.cond_threshold[cat][None, :],
                               (codes < 0) & ~nan[:, cat])
    return out


def unpack_rows(bits: npt.NDArray[np.uint64], n_rows: int) -> npt.NDArray[np.bool_]:
    """``(m, words)`` row bitsets -> ``(m, n_rows)`` booleans."""
    return np.unpackbits(bits.view(np.uint8), axis=1, count=n_rows, bitorder="little").view(bool)


SUM_CHUNK = 2048
"""Monomials summed together into each row's margin. Fixed, so a row's result never depends on
how many rows are evaluated with it."""


def weighted_row_sums(bits: npt.NDArray[np.uint64], weight: npt.NDArray[np.float64], n_rows: int) -> npt.NDArray[np.float64]:
    """``sum_M weight[M] * bit_M(r)`` for every row r, ``(n_rows, K)``.

    Each row adds its monomials' weights in monomial order (inactive ones add an
    exact 0.0), so identical rows get bit-identical sums wherever they sit in
    the batch.
    """
    out = np.empty((n_rows, weight.shape[1]), dtype=np.float64)
    step = 128  # words: 8192 rows per unpacked slice
    for w0 in range(0, bits.shape[1], step):
        r0 = w0 * 64
        count = min(n_rows - r0, step * 64)
        # at least 2 columns: numpy reduces a single column pairwise, several columns sequentially
        act = np.unpackbits(np.ascontiguousarray(bits[:, w0:w0 + step]).view(np.uint8), axis=1,
                            count=max(count, 2), bitorder="little").view(bool)
        for k in range(weight.shape[1]):
            out[r0:r0 + count, k] = np.einsum("ij,i->j", act, weight[:, k])[:count]
    return out


def row_blocks(poly: Polynomial, Xp: npt.NDArray[np.float64]) -> Iterator[tuple[slice, npt.NDArray[np.uint64]]]:
    """Yield ``(row_slice, cond_bits)``: ``cond_bits[c, w]`` bit r is condition c on row ``64 w + r``
    of the block; row ``n_conditions`` is all ones (the padding id)."""
    n, nc = Xp.shape[0], poly.n_conditions
    rows_per_block = int(np.clip(ENTRY_BUDGET // max(nc, 1), 64, 1 << 16)) // 64 * 64
    for r0 in range(0, n, rows_per_block):
        r1 = min(n, r0 + rows_per_block)
        packed = np.packbits(condition_matrix(poly, Xp[r0:r1]).T, axis=1, bitorder="little")
        words = -(-(r1 - r0) // 64)
        cond_bits = np.zeros((nc + 1, words * 8), dtype=np.uint8)
        cond_bits[:nc, :packed.shape[1]] = packed
        cond_bits[nc] = 0xFF
        yield slice(r0, r1), cond_bits.view(np.uint64)


def active_chunks(poly: Polynomial, cbits: npt.NDArray[np.uint64], index: npt.NDArray[np.int64],
                  per_chunk: int = SUM_CHUNK) -> Iterator[tuple[slice, npt.NDArray[np.uint64]]]:
    """Yield ``(position_slice, bits)``: on which rows of a block monomials ``index[position_slice]``
    hold, as ``[k, words]`` bitsets (AND of their conditions' bits)."""
    nc, words = poly.n_conditions, cbits.shape[1]
    ids_all = poly.padded_ids
    for m0 in range(0, index.shape[0], per_chunk):
        m1 = min(index.shape[0], m0 + per_chunk)
        ids = ids_all[index[m0:m1]]
        width = int((ids < nc).sum(axis=1).max()) if ids.shape[1] else 0
        acc = cbits[ids[:, 0]] if width else np.zeros((m1 - m0, words), dtype=np.uint64)
        for w in range(1, width):
            acc &= cbits[ids[:, w]]
        yield slice(m0, m1), acc


# -- building canonical polynomials from terms --------------------------------------------------


def padded_from_csr(offset: npt.NDArray[np.int64], entries: npt.NDArray[np.int32], pad: int) -> npt.NDArray[np.int32]:
    """CSR rows -> ``[rows, max_len]`` int32 matrix padded with ``pad``."""
    deg = np.diff(offset)
    width = int(deg.max()) if deg.size else 0
    out = np.full((deg.shape[0], max(width, 1)), pad, dtype=np.int32)
    if entries.size:
        row = np.repeat(np.arange(deg.shape[0]), deg)
        col = np.arange(entries.shape[0]) - np.repeat(offset[:-1], deg)
        out[row, col] = entries
    out.flags.writeable = False
    return out


def monomial_keys(ids: npt.NDArray[np.integer[Any]], pad: int) -> list[npt.NDArray[np.int64]]:
    """Pack padded, sorted id rows into int64 words whose lexicographic order is the rows' order.

    Digit ``i`` of a row is ``ids[:, i] + 1`` (0 for padding), so rows of different
    degree never collide.
    """
    bits = max(1, int(pad + 1).bit_length())
    per_word = max(1, 63 // bits)
    width = ids.shape[1]
    digits = np.where(ids >= pad, 0, ids.astype(np.int64) + 1)
    words = []
    for w0 in range(0, width, per_word):
        key = np.zeros(ids.shape[0], dtype=np.int64)
        for i in range(w0, min(width, w0 + per_word)):
            key = (key << bits) | digits[:, i]
        key <<= bits * (per_word - min(per_word, width - w0))
        words.append(key)
    if not words:
        words.append(np.zeros(ids.shape[0], dtype=np.int64))
    return words


def merge_terms(ids: npt.NDArray[np.int32], weight: npt.NDArray[np.float64],
                pad: int) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.float64]]:
    """Sum the weights of equal monomials (rows of ``ids``, padded with ``pad``).

    Sorting is stable, so equal terms add in their input order (tree order): the
    result is deterministic.
    """
    if ids.shape[0] == 0:
        return ids, weight
    words = monomial_keys(ids, pad)
    order = np.lexsort(words[::-1])
    sw = [w[order] for w in words]
    change = np.zeros(order.shape[0], dtype=bool)
    change[0] = True
    for w in sw:
        change[1:] |= w[1:] != w[:-1]
    starts = np.flatnonzero(change)
    return ids[order[starts]], np.add.reduceat(weight[order], starts, axis=0)


def _assemble(schema: Schema, cond_feature: npt.NDArray[Any], cond_kind: npt.NDArray[Any],
              cond_threshold: npt.NDArray[Any], cond_nan_true: npt.NDArray[Any],
              ids: npt.NDArray[np.int32], weight: npt.NDArray[np.float64], bias: npt.NDArray[np.float64],
              sort: bool = True) -> Polynomial:
    """Drop unused conditions, renumber, optionally sort monomials canonically, build CSR."""
    nc = cond_feature.shape[0]
    real = ids < nc
    used = np.zeros(nc + 1, dtype=bool)
    used[ids[real]] = True
    used[nc] = False
    new_id = np.cumsum(used) - 1
    n_new = int(used.sum())
    ids = np.where(real, new_id[np.minimum(ids, nc)], n_new).astype(np.int32)
    if sort and ids.shape[0]:
        deg = (ids < n_new).sum(axis=1)
        words = monomial_keys(ids, n_new)
        order = np.lexsort(words[::-1] + [deg])
        ids, weight = ids[order], weight[order]
    deg = (ids < n_new).sum(axis=1)
    offset = np.zeros(ids.shape[0] + 1, dtype=np.int64)
    np.cumsum(deg, out=offset[1:])
    keep = used[:nc]
    return Polynomial(
        schema=schema, cond_feature=cond_feature[keep], cond_kind=cond_kind[keep],
        cond_threshold=cond_threshold[keep], cond_nan_true=cond_nan_true[keep],
        mono_offset=offset, mono_cond=ids[ids < n_new], weight=weight, bias=bias,
    )


def from_terms(schema: Schema, cond_feature: npt.NDArray[Any], cond_kind: npt.NDArray[Any],
               cond_threshold: npt.NDArray[Any], cond_nan_true: npt.NDArray[Any],
               ids: npt.NDArray[np.int32], weight: npt.NDArray[np.float64], bias: npt.NDArray[np.float64],
               atol: float = 0.0, merged: bool = False) -> Polynomial:
    """Canonical Polynomial from (possibly repeated) terms.

    ``ids`` rows are sorted condition ids padded with ``len(cond_feature)``;
    the condition table must already be sorted and unique. Equal monomials are
    merged, monomials whose weights are all ``<= atol`` in magnitude are dropped
    (``atol=0`` drops exact zeros only), the empty monomial moves into ``bias``,
    unused conditions are removed and monomials are sorted by degree then ids.
    """
    nc = cond_feature.shape[0]
    weight = np.asarray(weight, dtype=np.float64).reshape(ids.shape[0], len(np.atleast_1d(bias)))
    if not merged:
        ids, weight = merge_terms(ids, weight, nc)
    bias = np.array(bias, dtype=np.float64, copy=True)
    empty = (ids >= nc).all(axis=1)
    if empty.any():
        bias += weight[empty].sum(axis=0)
    keep = ~empty & (np.abs(weight) > atol).any(axis=1)
    return _assemble(schema, np.asarray(cond_feature), np.asarray(cond_kind), np.asarray(cond_threshold),
                     np.asarray(cond_nan_true), ids[keep], weight[keep], bias)


def expand_products(leaf_ix: npt.NDArray[np.int64], ng: npt.NDArray[np.int64], g_first: npt.NDArray[np.int64],
                  nt: npt.NDArray[np.int64], tc: npt.NDArray[np.int64], tw: npt.NDArray[np.float64],
                  vals: npt.NDArray[np.float64], W: int, pad: int) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.float64]]:
    """Multiply out products of sums, one numpy step per factor.

    Row ``r`` of ``leaf_ix`` (a leaf, or a monomial being rewritten) has factors
    ``g_first[r] .. g_first[r] + ng[r] - 1``; factor ``g`` is
    ``sum_i tw[g, i] * cond(tc[g, i])`` over its ``nt[g]`` terms, where ``tc == -1``
    is the constant 1. Factors must come in increasing condition order so the
    result rows are sorted. Returns padded ids ``[terms, W]`` (pad ``pad``) and
    weights ``coef * vals[row]``; equal terms are not merged.
    """
    rl = leaf_ix.copy()
    coef = np.ones(rl.shape[0])
    ids = np.full((rl.shape[0], W), pad, dtype=np.int32)
    deg = np.zeros(rl.shape[0], dtype=np.int64)
    slots = int(ng[leaf_ix].max()) if leaf_ix.size else 0
    for s in range(slots):
        has = ng[rl] > s
        g = np.where(has, g_first[rl] + s, 0)
        reps = np.where(has, nt[g], 1)
        if np.all(reps == 1):
            within = np.zeros(rl.shape[0], dtype=np.int64)
        else:
            rl, coef, ids, deg, g, has = (np.repeat(a, reps, axis=0) for a in (rl, coef, ids, deg, g, has))
            within = np.arange(rl.shape[0]) - np.repeat(np.cumsum(reps) - reps, reps)
        sel = np.flatnonzero(has)
        cond = tc[g[sel], within[sel]]
        coef[sel] *= tw[g[sel], within[sel]]
        real = cond >= 0
        r = sel[real]
        ids[r, deg[r]] = cond[real]
        deg[r] += 1
    return ids, coef[:, None] * vals[rl]


# -- invariants --------------------------------------------------------------------------------


def verify_polynomial(p: Polynomial) -> None:
    """Raise ``ValidationError`` at the first broken invariant (docs/ir.md, Polynomial)."""

    def fail(msg: str, field: str | None = None, monomial: int | None = None) -> ValidationError:
        return ValidationError(msg, location=IRLocation(field=field, monomial=monomial))

    p.schema.validate()
    nc, K = p.n_conditions, p.schema.n_outputs
    for name in ("cond_kind", "cond_threshold", "cond_nan_true"):
        if getattr(p, name).shape != (nc,):
            raise fail(f"'{name}' has shape {getattr(p, name).shape}, expected ({nc},)", name)
    if np.any((p.cond_feature < 0) | (p.cond_feature >= p.n_features)):
        raise fail(f"condition feature out of range (model has {p.n_features} features)", "cond_feature")
    kinds = set(int(k) for k in ConditionKind)
    if not set(np.unique(p.cond_kind).tolist()) <= kinds:
        raise fail("unknown condition kind", "cond_kind")
    gt = p.cond_kind == ConditionKind.GREATER
    if not np.all(np.isfinite(p.cond_threshold[gt])):
        raise fail("GREATER conditions need finite thresholds", "cond_threshold")
    miss = p.cond_kind == ConditionKind.MISSING
    if np.any(~np.isnan(p.cond_threshold[miss])) or np.any(~p.cond_nan_true[miss]):
        raise fail("MISSING conditions have threshold NaN and hold on NaN", "cond_threshold")
    eq = p.cond_kind == ConditionKind.EQUAL
    codes = p.cond_threshold[eq]
    if np.any(~np.isfinite(codes) | (codes < 0) | (codes != np.trunc(codes))):
        raise fail("EQUAL conditions need a category code (a non-negative integer) as threshold", "cond_threshold")
    cat = eq | (p.cond_kind == ConditionKind.INVALID)
    if np.any(p.cond_nan_true[cat]) or np.any(~np.isnan(p.cond_threshold[cat & ~eq])):
        raise fail("EQUAL and INVALID conditions are false on NaN; INVALID has threshold NaN", "cond_nan_true")
    if np.intersect1d(p.cond_feature[gt], p.cond_feature[cat]).size:
        raise fail("a feature has both threshold and category conditions", "cond_kind")
    if p.schema.input_dtype == "float32" and np.any(
            p.cond_threshold[gt].astype(np.float32).astype(np.float64) != p.cond_threshold[gt]):
        raise fail("float32-input model has a threshold that is not a float32 value", "cond_threshold")
    if nc > 1:
        f, k, t = p.cond_feature, p.cond_kind, np.nan_to_num(p.cond_threshold, nan=np.inf)
        same_f = f[1:] == f[:-1]
        order_ok = (f[1:] > f[:-1]) | (same_f & (k[1:] > k[:-1])) | (same_f & (k[1:] == k[:-1]) & (t[1:] > t[:-1]))
        if not order_ok.all():
            raise fail("conditions must be sorted by (feature, kind, threshold) and unique", "cond_feature")
        # NaN mode per feature: with a MISSING condition no GREATER holds on NaN; else nan_true non-increasing
        has_missing = np.zeros(p.n_features, dtype=bool)
        has_missing[f[miss]] = True
        if np.any(p.cond_nan_true[gt] & has_missing[f[gt]]):
            raise fail("a feature with a MISSING condition has a GREATER condition true on NaN", "cond_nan_true")
        rise = same_f & gt[1:] & gt[:-1] & p.cond_nan_true[1:] & ~p.cond_nan_true[:-1]
        if rise.any():
            raise fail("cond_nan_true must not increase with the threshold within a feature", "cond_nan_true")
    off = p.mono_offset
    if off.ndim != 1 or off.shape[0] < 1 or off[0] != 0 or off[-1] != p.nnz:
        raise fail(f"mono_offset must run from 0 to len(mono_cond)={p.nnz}", "mono_offset")
    if np.any(np.diff(off) < 1):
        j = int(np.flatnonzero(np.diff(off) < 1)[0])
        raise fail("every monomial has at least one condition (the constant is 'bias')", "mono_offset", j)
    if p.weight.shape != (p.n_monomials, K):
        raise fail(f"weight has shape {p.weight.shape}, expected ({p.n_monomials}, {K})", "weight")
    if p.bias.shape != (K,):
        raise fail(f"bias has shape {p.bias.shape}, expected ({K},)", "bias")
    if not (np.all(np.isfinite(p.weight)) and np.all(np.isfinite(p.bias))):
        raise fail("weights and bias must be finite", "weight")
    if p.nnz:
        c = p.mono_cond
        if np.any((c < 0) | (c >= nc)):
            raise fail(f"monomial condition id out of range (n_conditions={nc})", "mono_cond")
        inner = np.ones(p.nnz, dtype=bool)
        inner[off[:-1]] = False  # first entry of each monomial
        prev_ok = np.ones(p.nnz, dtype=bool)
        prev_ok[1:] = (c[1:] > c[:-1]) & (p.cond_feature[c[1:]] != p.cond_feature[c[:-1]])
        bad = inner & ~prev_ok
        if bad.any():
            j = int(p.mono_of_entry[np.flatnonzero(bad)[0]])
            raise fail("monomial ids must increase and name each feature at most once", "mono_cond", j)
        words = monomial_keys(p.padded_ids, nc)
        order = np.lexsort(words[::-1])
        dup = np.ones(max(p.n_monomials - 1, 0), dtype=bool)
        for w in words:
            ws = w[order]
            dup &= ws[1:] == ws[:-1]
        if dup.any():
            raise fail("two monomials have the same conditions (merge them)", "mono_cond",
                       int(order[1:][dup][0]))


__all__ = ["ConditionKind", "Polynomial", "condition_matrix", "expand_products", "from_terms", "merge_terms",
           "monomial_keys", "padded_from_csr", "verify_polynomial"]
