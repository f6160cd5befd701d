"""C evaluator for oblivious decision tables (``runtime.c``), two ways.

* :func:`emit_table_source`: one self-contained C99 file holding a quantized
  ObliviousEnsemble as ``static const`` arrays plus the runtime, exporting the
  same functions as the forest C backend (``<prefix>_predict_raw`` ...), so
  :class:`lumber.backends.c.CLibrary` loads the built library unchanged.
* :class:`TableRuntime`: the runtime built once per process (for this CPU)
  and fed the arrays of any table file through ctypes: no per-model compile.

Both sum trees in the numpy evaluator's order, so margins agree bit for bit.
"""

from __future__ import annotations

import atexit
import ctypes
import json
import shutil
import tempfile
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any, Collection

import numpy as np
import numpy.typing as npt

from lumber.ir import CompileError, Diagnostic, IRLocation, ObliviousEnsemble
from lumber.ir.diagnostics import error

from ..base import Artifact, EmitOptions, fingerprint
from ..table import check as check_table

BLOCK = 1024
"""Rows per block: a group of trees computes its cells for a block, then adds them (a group's byte codes of a
block stay in L1)."""
GENERIC_ABI = 7
ISAS = ("auto", "portable", "avx2", "avx512")
"""Paths of the runtime's kernels (``isa`` options): ``auto`` takes the widest this CPU runs; ``portable``
is plain C; ``avx2`` and ``avx512`` (AVX-512F/BW/VL/VBMI) are x86-64 vector kernels. All give the same margins."""


def isa_code(isa: str) -> int:
    """The runtime's number of an ``isa`` name (its position in :data:`ISAS`), or a CompileError."""
    if isa not in ISAS:
        raise CompileError(f"unknown isa {isa!r}", f"isa is one of {', '.join(ISAS)}")
    return ISAS.index(isa)


def runtime_source() -> str:
    return resources.files("lumber.backends.table_c").joinpath("runtime.c").read_text(encoding="utf-8")


def coded_arrays(ens: ObliviousEnsemble) -> dict[str, npt.NDArray[Any]] | None:
    """The runtime's *terms* of the trees with bin levels (None when no level is one): a tree's index
    is ``sum_j (bin[term_col[j]] > term_bin[j]) << term_shift[j]``, one term per plain level and one
    per border of a bin group (shifted to the group's first level, so they add up to its code);
    plain trees keep their levels (``term_offset[t] == term_offset[t + 1]``)."""
    if not ens.has_bin_levels:
        return None
    assert ens.level_border_offset is not None and ens.level_code_bin is not None and ens.level_code_bit is not None
    assert ens.level_col is not None and ens.level_bin is not None
    bl, boff, bit = ens.bin_level, ens.level_border_offset, ens.level_code_bit
    coded = np.zeros(ens.n_trees, dtype=bool)
    np.logical_or.at(coded, ens.level_tree, bl)
    counts = np.zeros(ens.n_trees, dtype=np.int64)
    plain = np.zeros(ens.n_trees, dtype=np.int32)
    cols: list[npt.NDArray[Any]] = []
    bins: list[npt.NDArray[Any]] = []
    shifts: list[npt.NDArray[Any]] = []
    for t in np.flatnonzero(coded).tolist():
        lo = int(ens.level_offset[t])
        for p in range(int(ens.depth[t])):
            i = lo + p
            if not bl[i]:
                if plain[t] != p:
                    raise CompileError("internal error: a bin group before a plain level (the C runtime reads "
                                       "a tree's plain levels first)")
                plain[t] += 1
                cols.append(ens.level_col[i:i + 1]); bins.append(ens.level_bin[i:i + 1]); shifts.append(np.array([p]))
            elif bit[i] == 0:
                g = ens.level_code_bin[boff[i]:boff[i + 1]]
                cols.append(np.full(g.shape[0], ens.level_col[i])); bins.append(g); shifts.append(np.full(g.shape[0], p))
            else:
                continue
            counts[t] += cols[-1].shape[0]
    off = np.zeros(ens.n_trees + 1, dtype=np.int64)
    np.cumsum(counts, out=off[1:])
    cat = (lambda parts: np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64))
    return {"term_offset": off, "term_col": cat(cols).astype(np.int32), "term_bin": cat(bins).astype(np.int64),
            "term_shift": cat(shifts).astype(np.int32), "tree_plain": plain}


def dictionary_arrays(ens: ObliviousEnsemble) -> dict[str, npt.NDArray[Any]] | None:
    """Per-tree dictionaries of the distinct cell values (None when no tree gets one): the runtime's
    fused paths read a byte code per cell (``cell_code``, laid out like ``value``) and then the tree's
    value ``dict_value[dict_offset[t] + code]``. Exact re-composition leaves few distinct sums per tree
    (LightGBM 500 x 63 Adult at depth 10: median 33 of 1,024 cells), so a tree reads an eighth of the
    bytes and a group of tables stays in L1. A tree gets one when it has one output, at most 256 distinct
    values (bit patterns: -0.0 and each NaN stay themselves) and the codes plus values take at most half
    its table's bytes; the values are the table's own, so sums stay bit for bit."""
    T = ens.n_trees
    if T == 0:
        return None
    cells = np.diff(ens.value_offset)
    bits = np.ascontiguousarray(ens.value, dtype=np.float64).view(np.int64)
    distinct = np.zeros(T, dtype=np.int64)
    rank = np.zeros(bits.shape[0], dtype=np.int64)  # of each cell's value among its tree's distinct values
    groups = []
    for w in np.unique(cells).tolist():  # trees of one table size at once: a row-wise sort of their tables
        trees = np.flatnonzero(cells == w)
        at = ens.value_offset[trees][:, None] + np.arange(w)[None, :]
        a = bits[at]
        order = np.argsort(a, axis=1, kind="stable")
        srt = np.take_along_axis(a, order, axis=1)
        new = np.ones(a.shape, dtype=bool)
        new[:, 1:] = srt[:, 1:] != srt[:, :-1]
        r = np.cumsum(new, axis=1) - 1
        distinct[trees] = r[:, -1] + 1
        by_cell = np.empty_like(r)
        np.put_along_axis(by_cell, order, r, axis=1)
        rank[at] = by_cell
        groups.append((trees, srt, new, r))
    use = (distinct <= 256) & (ens.tree_output >= 0) & (cells + 8 * distinct <= 4 * cells)
    if not use.any():
        return None
    dict_offset = np.zeros(T + 1, dtype=np.int64)
    np.cumsum(np.where(use, distinct, 0), out=dict_offset[1:])
    dict_value = np.zeros(int(dict_offset[-1]), dtype=np.int64)
    for trees, srt, new, r in groups:
        keep = use[trees]
        pos = dict_offset[trees][:, None] + r
        sel = new & keep[:, None]
        dict_value[pos[sel]] = srt[sel]
    tree = np.repeat(np.arange(T), cells)
    code = np.where(use[tree], rank, 0).astype(np.uint8)
    # 4 bytes of padding: the AVX-512 kernel reads a cell's code as the low byte of the 4 bytes at it
    code = np.concatenate([code, np.zeros(4, dtype=np.uint8)])
    return {"dict_offset": dict_offset, "dict_value": dict_value.view(np.float64), "cell_code": code}


ROW_GROUP = 64
"""Trees per vector step of the one-row kernel (one byte lane per tree)."""


def row_arrays(ens: ObliviousEnsemble) -> dict[str, npt.NDArray[Any]] | None:
    """The one-row kernel's layout (None when the model does not fit it): trees in groups of
    :data:`ROW_GROUP`, one byte lane each; per group its *slots*, and per slot four vectors of
    ROW_GROUP bytes: each tree's term column, term bin, and weight in the index's low and high byte
    (a tree with fewer terms pads with column 0 and bin 255, which no byte bin exceeds). The row's
    index of every tree of a group is then the sum over slots of the weights where
    ``bin[column] > bin``, in two bytes. Fits when bins are bytes, there are at most 128 binarized
    columns (the row's bins sit in two registers) and no tree's low-byte terms add up past 255."""
    assert ens.level_col is not None and ens.level_bin is not None and ens.col_feature is not None
    T = ens.n_trees
    if T == 0 or bin_type(ens) != "uint8_t" or ens.col_feature.shape[0] > 128:
        return None
    coded = coded_arrays(ens)
    own_tree = np.zeros(T, dtype=bool) if coded is None else np.diff(coded["term_offset"]) > 0
    n_terms = ens.depth.astype(np.int64)
    if coded is not None:
        n_terms = np.where(own_tree, np.diff(coded["term_offset"]), n_terms)
    start = np.zeros(T + 1, dtype=np.int64)
    np.cumsum(n_terms, out=start[1:])
    tree = np.repeat(np.arange(T), n_terms)
    slot = np.arange(int(start[-1])) - start[tree]
    own = own_tree[tree]  # a term of a tree with bin levels (else a plain level)
    lvl = np.where(own, 0, ens.level_offset[tree] + slot)
    col = ens.level_col[lvl].astype(np.int64)
    kb = ens.level_bin[lvl].astype(np.int64)
    shift = slot.copy()
    if coded is not None:
        at = np.where(own, coded["term_offset"][tree] + slot, 0)
        col = np.where(own, coded["term_col"][at], col)
        kb = np.where(own, coded["term_bin"][at], kb)
        shift = np.where(own, coded["term_shift"][at], shift)
    if shift.size and int(shift.max()) >= 16:
        return None
    low = np.zeros(T, dtype=np.int64)
    np.add.at(low, tree, np.where(shift < 8, 1 << np.minimum(shift, 7), 0))
    if int(low.max()) > 255:
        return None
    groups = -(-T // ROW_GROUP)
    per_group = np.zeros(groups, dtype=np.int64)
    np.maximum.at(per_group, np.arange(T) // ROW_GROUP, n_terms)
    row_off = np.zeros(groups + 1, dtype=np.int64)
    np.cumsum(per_group, out=row_off[1:])
    vec = np.zeros((int(row_off[-1]), 4, ROW_GROUP), dtype=np.uint8)
    vec[:, 1, :] = 255
    s = row_off[tree // ROW_GROUP] + slot
    lane = tree % ROW_GROUP
    vec[s, 0, lane] = col
    vec[s, 1, lane] = kb
    vec[s, 2, lane] = np.where(shift < 8, 1 << np.minimum(shift, 7), 0)
    vec[s, 3, lane] = np.where(shift >= 8, 1 << np.maximum(shift - 8, 0), 0)
    return {"row_off": row_off, "row_vec": vec.reshape(-1)}


def bin_type(ens: ObliviousEnsemble) -> str:
    assert ens.border_offset is not None
    widths = np.diff(ens.border_offset)
    return "uint16_t" if widths.size and int(widths.max()) > 255 else "uint8_t"


@dataclass(frozen=True, kw_only=True)
class TableCEmitOptions(EmitOptions):
    """Emission knobs of the specialized C source."""

    prefix: str = "lumber"
    """Exported symbols are ``<prefix>_predict_raw`` and so on (as the forest C backend's)."""
    block: int = BLOCK
    source_fingerprint: str | None = None
    """Fingerprint recorded in the library (default: the ensemble's); lumber.compile passes the source model's."""
    isa: str = "auto"
    """Kernel path (:data:`ISAS`): ``auto`` picks the widest the CPU runs when the library loads; a forced
    path runs where the CPU has it, else the library takes the widest it has (margins are the same)."""


def check(ens: ObliviousEnsemble, options: TableCEmitOptions | None = None) -> list[Diagnostic]:
    from lumber.backends.c.emit import _IDENT

    diags = check_table(ens)
    options = options or TableCEmitOptions()
    if not _IDENT.match(options.prefix):
        diags.append(error(f"C symbol prefix {options.prefix!r} is not a C identifier", IRLocation(field="prefix")))
    if options.block < 64 or options.block > 4096 or options.block % 64:
        diags.append(error(f"block must be a multiple of 64 between 64 and 4096, got {options.block}",
                           IRLocation(field="block")))
    if options.isa not in ISAS:
        diags.append(error(f"unknown isa {options.isa!r} (one of {', '.join(ISAS)})", IRLocation(field="isa")))
    return diags


def _arr(ctype: str, name: str, items: list[str], per_line: int = 12) -> str:
    if not items:
        items = ["0"]
    lines = [", ".join(items[i:i + per_line]) for i in range(0, len(items), per_line)]
    return f"static const {ctype} {name}[{len(items)}] = {{\n  " + ",\n  ".join(lines) + "\n};\n"


def _ints(a: npt.NDArray[Any]) -> list[str]:
    return [str(int(v)) for v in a.tolist()]


def emit_table_source(ens: ObliviousEnsemble, options: TableCEmitOptions | None = None) -> Artifact:
    """C source (and header) for a quantized ensemble; ABI-compatible with the forest C backend."""
    from lumber import __version__
    from lumber.backends.c.emit import ABI_VERSION, c_reals, c_string

    options = options or TableCEmitOptions()
    diags = check(ens, options)
    if diags:
        raise CompileError(diags)
    assert ens.col_feature is not None and ens.col_nan_bin is not None and ens.border_offset is not None
    assert ens.border is not None and ens.level_col is not None and ens.level_bin is not None
    schema = ens.schema
    single = schema.input_dtype == "float32"
    in_t = "float" if single else "double"
    fp = options.source_fingerprint or fingerprint(ens)
    K, F, T = ens.n_outputs, ens.n_features, ens.n_trees
    meta = {"generator": "lumber", "abi_version": ABI_VERSION, "fingerprint": fp, "prefix": options.prefix,
            "input_dtype": schema.input_dtype, "n_trees": T, "schema": schema.to_dict(), "form": "oblivious",
            "statistics": ens.statistics(), "lumber_version": __version__}
    defines = {"LT_IN_T": in_t, "LT_BIN_T": bin_type(ens), "LT_BLOCK": str(options.block), "LT_FIXED_K": str(K),
               "LT_FIXED_F": str(F), "LUMBER_IN_T": in_t, "LT_ISA": str(ISAS.index(options.isa))}
    header = (resources.files("lumber.backends.c").joinpath("api.h").read_text(encoding="utf-8")
              .replace("@PREFIX@", options.prefix).replace("@IN_T@", in_t)
              .replace("@GUARD@", f"LUMBER_{options.prefix.upper()}_H"))
    div = np.maximum(ens.trees_per_output(), 1.0) if schema.average else np.ones(K)
    p = options.prefix
    coded = coded_arrays(ens)
    dicts = dictionary_arrays(ens)
    rows = row_arrays(ens)
    parts = [
        f"/* Generated by lumber {__version__}; do not edit.\n"
        f" * Model fingerprint {fp}\n"
        f" * Oblivious tables: {T} trees (max depth {ens.max_depth}), {ens.value.shape[0]} table entries, "
        f"{ens.col_feature.shape[0]} binarized columns, {F} features, {K} output(s), {schema.input_dtype} input.\n"
        f" * Build: cc -O3 -fPIC -shared -std=c99 {options.name}.c -o lib{options.name}.so -lm\n */\n",
        "".join(f"#define {k} {v}\n" for k, v in defines.items()),
        header, "\n", runtime_source(), "\n",
        "/* the forced path where this CPU has it, else the widest it has */\n"
        "#define LT_ISA_RUN (lt_isa_available(LT_ISA) ? LT_ISA : LT_ISA_AUTO)\n",
        _arr("int32_t", "L_COL_FEATURE", _ints(ens.col_feature)),
        _arr("int32_t", "L_COL_NAN_BIN", _ints(ens.col_nan_bin)),
        _arr("int64_t", "L_BORDER_OFFSET", _ints(ens.border_offset)),
        _arr("LT_IN_T", "L_BORDER", c_reals(ens.border, single), 6),
        _arr("int32_t", "L_DEPTH", _ints(ens.depth), 24),
        _arr("int32_t", "L_TREE_OUTPUT", _ints(ens.tree_output), 24),
        _arr("int64_t", "L_LEVEL_OFFSET", _ints(ens.level_offset)),
        _arr("int32_t", "L_LEVEL_COL", _ints(ens.level_col), 16),
        _arr("LT_BIN_T", "L_LEVEL_BIN", _ints(ens.level_bin), 16),
        _arr("int64_t", "L_VALUE_OFFSET", _ints(ens.value_offset)),
        _arr("double", "L_VALUE", c_reals(ens.value, False), 4),
        _arr("double", "L_BASE", c_reals(np.asarray(schema.base_score, dtype=np.float64), False), 4),
        _arr("double", "L_DIVISOR", c_reals(div, False), 4),
        _arr("int32_t", "L_COL_INVALID_BIN", _ints(ens.col_invalid_bin)) if ens.col_invalid_bin is not None else "",
        "" if coded is None else (_arr("int64_t", "L_TERM_OFFSET", _ints(coded["term_offset"]))
                                  + _arr("int32_t", "L_TERM_COL", _ints(coded["term_col"]), 16)
                                  + _arr("LT_BIN_T", "L_TERM_BIN", _ints(coded["term_bin"]), 16)
                                  + _arr("int32_t", "L_TERM_SHIFT", _ints(coded["term_shift"]), 16)
                                  + _arr("int32_t", "L_TREE_PLAIN", _ints(coded["tree_plain"]), 24)),
        "" if dicts is None else (_arr("int64_t", "L_DICT_OFFSET", _ints(dicts["dict_offset"]))
                                  + _arr("double", "L_DICT_VALUE", c_reals(dicts["dict_value"], False), 4)
                                  + _arr("uint8_t", "L_CELL_CODE", _ints(dicts["cell_code"]), 24)),
        "" if rows is None else (_arr("int64_t", "L_ROW_OFF", _ints(rows["row_off"]))
                                 + _arr("uint8_t", "L_ROW_VEC", _ints(rows["row_vec"]), 32)),
        "static const lt_model L_MODEL = {\n"
        f"    {F}, {K}, {T}, {ens.col_feature.shape[0]}, {int(schema.average)}, {int(schema.post_transform)},\n"
        f"    {c_reals(np.array([schema.sigmoid_alpha]), False)[0]}, {c_reals(np.array([schema.isolation_c]), False)[0]},\n"
        "    L_COL_FEATURE, L_COL_NAN_BIN, L_BORDER_OFFSET, L_BORDER, L_DEPTH, L_TREE_OUTPUT, L_LEVEL_OFFSET,\n"
        "    L_LEVEL_COL, L_LEVEL_BIN, L_VALUE_OFFSET, L_VALUE, L_BASE, L_DIVISOR,\n"
        f"    {int(schema.category_rule)}, {'L_COL_INVALID_BIN' if ens.col_invalid_bin is not None else 'NULL'},\n"
        + ("    NULL, NULL, NULL, NULL, NULL,\n" if coded is None else
           "    L_TERM_OFFSET, L_TERM_COL, L_TERM_BIN, L_TERM_SHIFT, L_TREE_PLAIN,\n")
        + ("    NULL, NULL, NULL,\n" if dicts is None else "    L_DICT_OFFSET, L_DICT_VALUE, L_CELL_CODE,\n")
        + ("    NULL, NULL\n};\n" if rows is None else "    L_ROW_OFF, L_ROW_VEC\n};\n"),
        f"static const char L_FINGERPRINT[] = {c_string(fp)};\n",
        f"static const char L_METADATA[] = {c_string(json.dumps(meta, sort_keys=True, default=str))};\n\n",
        f"int32_t {p}_predict_raw(const {in_t} *rows, int64_t n, double *out, int32_t threads)\n"
        "{ return lt_run(&L_MODEL, rows, n, out, NULL, threads, 0, LT_ISA_RUN) ? 1 : 0; }\n",
        f"int32_t {p}_predict_transformed(const {in_t} *rows, int64_t n, double *out, int32_t threads)\n"
        "{ return lt_run(&L_MODEL, rows, n, out, NULL, threads, 1, LT_ISA_RUN) ? 1 : 0; }\n",
        f"void {p}_predict_row(const {in_t} *row, double *out)\n"
        "{ (void)lt_run(&L_MODEL, row, 1, out, NULL, 1, 0, LT_ISA_RUN); }\n",
        f"int32_t {p}_apply(const {in_t} *rows, int64_t n, int32_t *out)\n"
        "{ return lt_run(&L_MODEL, rows, n, NULL, out, 1, 0, LT_ISA_RUN) ? 1 : 0; }\n",
        f"int32_t {p}_n_features(void) {{ return {F}; }}\n",
        f"int32_t {p}_n_outputs(void) {{ return {K}; }}\n",
        f"int32_t {p}_n_trees(void) {{ return {T}; }}\n",
        f"int32_t {p}_input_is_float32(void) {{ return {int(single)}; }}\n",
        f"int32_t {p}_has_openmp(void)\n{{\n#ifdef _OPENMP\n    return 1;\n#else\n    return 0;\n#endif\n}}\n",
        f"int32_t {p}_abi_version(void) {{ return {ABI_VERSION}; }}\n",
        f"const char *{p}_fingerprint(void) {{ return L_FINGERPRINT; }}\n",
        f"const char *{p}_metadata(void) {{ return L_METADATA; }}\n",
    ]
    source = "".join(parts)
    return Artifact(target="c-source", files={f"{options.name}.c": source.encode(), f"{options.name}.h": header.encode()},
                    fingerprint=fp, metadata=meta)


# -- the generic runtime: built once per process, fed any table file's arrays ---------------------

_GENERIC_EXPORTS = """
int32_t lt_generic_abi(void) { return %d; }
int64_t lt_model_size(void) { return (int64_t)sizeof(lt_model); }
int32_t lt_has_openmp(void)
{
#ifdef _OPENMP
    return 1;
#else
    return 0;
#endif
}
int32_t lt_isa(int32_t isa) { return (int32_t)lt_isa_resolve(isa); }
int32_t lt_predict(const lt_model *M, const LT_IN_T *rows, int64_t n, double *out, int32_t threads, int32_t transform,
                   int32_t isa)
{ return (int32_t)lt_run(M, rows, n, out, NULL, threads, transform, isa); }
int32_t lt_apply(const lt_model *M, const LT_IN_T *rows, int64_t n, int32_t *leaf, int32_t threads)
{ return (int32_t)lt_run(M, rows, n, NULL, leaf, threads, 0, 0); }
""" % GENERIC_ABI


def generic_source(in_t: str, bin_t: str, block: int = BLOCK) -> str:
    return (f"#define LT_IN_T {in_t}\n#define LT_BIN_T {bin_t}\n#define LT_BLOCK {block}\n"
            + runtime_source() + _GENERIC_EXPORTS)


def _model_struct(in_ctype: Any, bin_ctype: Any) -> type[ctypes.Structure]:
    P = ctypes.POINTER

    class LtModel(ctypes.Structure):
        _fields_ = [("n_features", ctypes.c_int32), ("n_outputs", ctypes.c_int32), ("n_trees", ctypes.c_int32),
                    ("n_cols", ctypes.c_int32), ("average", ctypes.c_int32), ("transform", ctypes.c_int32),
                    ("sigmoid_alpha", ctypes.c_double), ("isolation_c", ctypes.c_double),
                    ("col_feature", P(ctypes.c_int32)), ("col_nan_bin", P(ctypes.c_int32)),
                    ("border_offset", P(ctypes.c_int64)), ("border", P(in_ctype)), ("depth", P(ctypes.c_int32)),
                    ("tree_output", P(ctypes.c_int32)), ("level_offset", P(ctypes.c_int64)),
                    ("level_col", P(ctypes.c_int32)), ("level_bin", P(bin_ctype)),
                    ("value_offset", P(ctypes.c_int64)), ("value", P(ctypes.c_double)),
                    ("base", P(ctypes.c_double)), ("divisor", P(ctypes.c_double)),
                    ("cat_rule", ctypes.c_int32), ("col_invalid_bin", P(ctypes.c_int32)),
                    ("term_offset", P(ctypes.c_int64)), ("term_col", P(ctypes.c_int32)),
                    ("term_bin", P(bin_ctype)), ("term_shift", P(ctypes.c_int32)), ("tree_plain", P(ctypes.c_int32)),
                    ("dict_offset", P(ctypes.c_int64)), ("dict_value", P(ctypes.c_double)),
                    ("cell_code", P(ctypes.c_uint8)), ("row_off", P(ctypes.c_int64)), ("row_vec", P(ctypes.c_uint8))]

    return LtModel


@lru_cache(maxsize=8)
def _generic_library(in_t: str, bin_t: str, march_native: bool, openmp: bool | None, cc: str | None) -> ctypes.CDLL:
    from lumber.backends.c.build import BuildOptions, build_shared

    tmp = tempfile.mkdtemp(prefix="lumber-table-rt-")
    atexit.register(shutil.rmtree, tmp, True)
    so = Path(tmp, f"lt_{in_t}_{bin_t}.so")
    try:
        build_shared(generic_source(in_t, bin_t), so, BuildOptions(cc=cc, march_native=march_native, openmp=openmp))
    except CompileError:
        if not march_native:
            raise
        # a compiler without -march=native: the portable build (AVX2 clones where the compiler has them)
        build_shared(generic_source(in_t, bin_t), so, BuildOptions(cc=cc, openmp=openmp))
    lib = ctypes.CDLL(str(so))
    lib.lt_generic_abi.restype = ctypes.c_int32
    lib.lt_isa.restype = ctypes.c_int32
    lib.lt_isa.argtypes = [ctypes.c_int32]
    lib.lt_model_size.restype = ctypes.c_int64
    lib.lt_has_openmp.restype = ctypes.c_int32
    for fn in (lib.lt_predict, lib.lt_apply):
        fn.restype = ctypes.c_int32
    lib.lt_predict.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p, ctypes.c_int32,
                               ctypes.c_int32, ctypes.c_int32]
    lib.lt_apply.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p, ctypes.c_int32]
    if lib.lt_generic_abi() != GENERIC_ABI:
        raise CompileError("table runtime ABI mismatch (stale build)")
    return lib


def isa_available(isa: str, *, march_native: bool = True, cc: str | None = None) -> bool:
    """Whether this CPU runs the kernels' ``isa`` path (:data:`ISAS`; builds the runtime once to ask)."""
    return bool(_generic_library("double", "uint8_t", march_native, None, cc).lt_isa(isa_code(isa)) >= 0)


class TableRuntime:
    """The C evaluator for one quantized ensemble, without per-model compilation.

    ``march_native`` (default True) builds the runtime for this CPU: it is built
    here, at load time, and never shipped. ``isa`` (:data:`ISAS`) picks the kernels' path:
    ``auto`` the widest this CPU runs (``self.isa`` names it); a path the CPU lacks is a CompileError.
    """

    def __init__(self, ens: ObliviousEnsemble, *, march_native: bool = True, openmp: bool | None = None,
                 cc: str | None = None, isa: str = "auto") -> None:
        diags = check_table(ens)
        if diags:
            raise CompileError(diags)
        code = isa_code(isa)
        self.ens = ens
        self.schema = ens.schema
        single = ens.schema.input_dtype == "float32"
        in_t = "float" if single else "double"
        self.dtype = np.dtype(np.float32 if single else np.float64)
        bt = bin_type(ens)
        bin_ctype = ctypes.c_uint8 if bt == "uint8_t" else ctypes.c_uint16
        self._lib = _generic_library(in_t, bt, march_native, openmp, cc)
        resolved = self._lib.lt_isa(code)
        if resolved < 0:
            raise CompileError(f"this CPU cannot run the table kernels' {isa} path",
                               "isa='auto' takes the widest path this CPU runs")
        self._isa = code
        self.isa = ISAS[resolved]
        """The path the kernels take here (``portable``, ``avx2`` or ``avx512``)."""
        Struct = _model_struct(ctypes.c_float if single else ctypes.c_double, bin_ctype)
        if ctypes.sizeof(Struct) != self._lib.lt_model_size():
            raise CompileError("table runtime struct layout mismatch")
        assert ens.col_feature is not None and ens.col_nan_bin is not None and ens.border_offset is not None
        assert ens.border is not None and ens.level_col is not None and ens.level_bin is not None
        K = ens.n_outputs
        div = np.maximum(ens.trees_per_output(), 1.0) if ens.schema.average else np.ones(K)
        keep: dict[str, npt.NDArray[Any]] = {
            "col_feature": np.ascontiguousarray(ens.col_feature, dtype=np.int32),
            "col_nan_bin": np.ascontiguousarray(ens.col_nan_bin, dtype=np.int32),
            "border_offset": np.ascontiguousarray(ens.border_offset, dtype=np.int64),
            "border": np.ascontiguousarray(ens.border, dtype=self.dtype),
            "depth": np.ascontiguousarray(ens.depth, dtype=np.int32),
            "tree_output": np.ascontiguousarray(ens.tree_output, dtype=np.int32),
            "level_offset": np.ascontiguousarray(ens.level_offset, dtype=np.int64),
            "level_col": np.ascontiguousarray(ens.level_col, dtype=np.int32),
            "level_bin": np.ascontiguousarray(ens.level_bin, dtype=np.uint8 if bt == "uint8_t" else np.uint16),
            "value_offset": np.ascontiguousarray(ens.value_offset, dtype=np.int64),
            "value": np.ascontiguousarray(ens.value, dtype=np.float64),
            "base": np.asarray(ens.schema.base_score, dtype=np.float64),
            "divisor": np.asarray(div, dtype=np.float64),
        }
        if ens.col_invalid_bin is not None:
            keep["col_invalid_bin"] = np.ascontiguousarray(ens.col_invalid_bin, dtype=np.int32)
        coded = coded_arrays(ens)
        if coded is not None:
            keep.update({k: np.ascontiguousarray(v, dtype=np.uint8 if bt == "uint8_t" else np.uint16)
                         if k == "term_bin" else np.ascontiguousarray(v) for k, v in coded.items()})
        dicts = dictionary_arrays(ens)
        if dicts is not None:
            keep.update(dicts)
        rows = row_arrays(ens)
        if rows is not None:
            keep.update(rows)
        self._keep = {k: (v if v.size else np.zeros(1, dtype=v.dtype)) for k, v in keep.items()}
        fields = {name: ctypes.cast(a.ctypes.data, dict(Struct._fields_)[name]) for name, a in self._keep.items()}
        sch = ens.schema
        self._model = Struct(ens.n_features, K, ens.n_trees, ens.col_feature.shape[0], int(sch.average),
                             int(sch.post_transform), float(sch.sigmoid_alpha), float(sch.isolation_c), **fields,
                             cat_rule=int(sch.category_rule))
        self.has_openmp = bool(self._lib.lt_has_openmp())
        self._mref = ctypes.byref(self._model)
        self._predict = self._lib.lt_predict

    def _rows(self, X: npt.NDArray[Any]) -> npt.NDArray[Any]:
        if X.dtype != self.dtype or X.ndim != 2 or X.shape[1] != self.ens.n_features or not X.flags.c_contiguous:
            raise ValueError(f"expected a C-contiguous {self.dtype} array with {self.ens.n_features} columns")
        return X

    def predict_raw(self, X: npt.NDArray[Any], threads: int = 1, transformed: bool = False) -> npt.NDArray[np.float64]:
        """Margins ``(n, n_outputs)`` of prepared rows (C-contiguous, the model's input dtype)."""
        X = self._rows(X)
        out = np.empty((X.shape[0], self.ens.n_outputs))
        rc = self._lib.lt_predict(ctypes.byref(self._model), X.ctypes.data, X.shape[0], out.ctypes.data,
                                  max(1, int(threads)), int(transformed), self._isa)
        if rc != 0:
            raise MemoryError("table evaluator: out of memory for its scratch buffers")
        return out

    def predict_one(self, x: npt.NDArray[Any]) -> npt.NDArray[np.float64]:
        """Margins ``(1, n_outputs)`` of one prepared row (C-contiguous ``(1, n_features)`` of the model's input
        dtype, unchecked: the caller checks): the runtime's one-row kernel without the batch path's setup."""
        out = np.empty((1, self.ens.n_outputs))
        if self._predict(self._mref, x.ctypes.data, 1, out.ctypes.data, 1, 0, self._isa) != 0:
            raise MemoryError("table evaluator: out of memory for its scratch buffers")
        return out

    def apply(self, X: npt.NDArray[Any], threads: int = 1) -> npt.NDArray[np.int32]:
        X = self._rows(X)
        out = np.empty((X.shape[0], self.ens.n_trees), dtype=np.int32)
        rc = self._lib.lt_apply(ctypes.byref(self._model), X.ctypes.data, X.shape[0], out.ctypes.data,
                                max(1, int(threads)))
        if rc != 0:
            raise MemoryError("table evaluator: out of memory for its scratch buffers")
        return out


def exported_names(prefix: str) -> Collection[str]:
    return [f"{prefix}_{n}" for n in ("predict_raw", "predict_transformed", "predict_row", "apply", "n_features",
                                      "n_outputs", "n_trees", "input_is_float32", "has_openmp", "abi_version",
                                      "fingerprint", "metadata")]


__all__ = ["BLOCK", "ISAS", "ROW_GROUP", "TableCEmitOptions", "TableRuntime", "check", "dictionary_arrays", "emit_table_source",
           "exported_names", "generic_source", "isa_available", "isa_code", "row_arrays", "runtime_source"]
