"""Print a Forest as one self-contained C99 file: tables of node slots plus the shipped runtime.

The model is data (``static const`` arrays), so the file compiles in about a
second whatever the model size; small models can also be printed as nested
``if``/``else`` code (``unroll=True``). Names and order are deterministic: the
same Forest gives the same bytes.
"""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass
from importlib import resources
from typing import Sequence

import numpy as np
import numpy.typing as npt

from lumber.ir import CompileError, Diagnostic, Forest, IRLocation
from lumber.ir.diagnostics import error
from lumber.ir.forest import ZERO_THRESHOLD

from ..base import Artifact, EmitOptions, fingerprint
from .layout import (FLAG_CATEGORICAL, FLAG_FAST_CAT, FLAG_MISSING_LEFT, FLAG_MISSING_ZERO, MODE_CODE,
                     MODE_CONVERGE, MODE_SPECIAL, BinTables, Layout, bin_tables, layout)

ABI_VERSION = 1
UNROLL_MAX_NODES = 2048
"""``unroll=None`` prints code (if/else) for models with at most this many nodes."""
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_INT32_MAX = 2**31 - 1
WALKS = ("auto", "binned", "values", "code")
CODE_BLOCK_TREES = 16
"""``walk="code"``: trees per generated function; a block of rows goes through one before the next."""


@dataclass(frozen=True, kw_only=True)
class CEmitOptions(EmitOptions):
    """C emission knobs."""

    prefix: str = "lumber"
    """Exported symbols are ``<prefix>_predict_raw`` and so on."""
    unroll: bool | None = False
    """Trees as if/else code instead of tables; None picks code for small models."""
    block: int | None = None
    """Rows walked together through one tree before moving to the next; None: for binned walks as many
    as keep the block's codes within 16 KiB of L1 cache (64 to 256 rows), else 64."""
    walk: str = "auto"
    """``"binned"``: rows coded as threshold ranks (1-2 bytes) before the walk, branch-free; ``"values"``:
    the branch-free walk compares the row values; ``"code"``: rows coded as for binned, each tree
    if/else code comparing the codes with its threshold ranks as constants (branchy: fast where the
    rows' paths are predictable, as real data's often are); ``"auto"``: binned when every feature has
    at most 65534 thresholds.
    ``lumber.compile(..., sample=rows)`` times the binned (or values) and code walks on the rows and
    keeps the faster."""


def _template(name: str) -> str:
    return resources.files("lumber.backends.c").joinpath(name).read_text(encoding="utf-8")


_TRAILING = re.compile(r"\.?0+p")


def _hex(v: float) -> str:
    """Shortest exact hex literal: ``0x1.8p+1``, ``0`` for zero (fewer characters to parse)."""
    if v == 0.0:
        return "-0.0" if str(v)[0] == "-" else "0"
    h = v.hex()
    return _TRAILING.sub("p", h) if "." in h else h


def c_reals(values: npt.NDArray[np.float64], single: bool) -> list[str]:
    """Exact C literals (hex floats; NAN/INFINITY for the rest), formatting each distinct value once."""
    bits = np.ascontiguousarray(values, dtype=np.float64).view(np.uint64)
    uniq, inverse = np.unique(bits, return_inverse=True)
    texts = []
    for v in uniq.view(np.float64).tolist():
        if v != v:
            t = "NAN"
        elif v in (np.inf, -np.inf):
            t = "INFINITY" if v > 0 else "-INFINITY"
        else:
            t = _hex(v)
            if single and "p" in t:
                t += "f"
        texts.append(t)
    return [texts[i] for i in inverse.reshape(-1).tolist()]


def c_string(text: str) -> str:
    """A C string literal holding ``text`` (ASCII, escaped)."""
    esc = text.encode("ascii", "backslashreplace").decode().replace("\\", "\\\\").replace('"', '\\"')
    return '"' + esc + '"'


def _array(ctype: str, name: str, items: Sequence[str], per_line: int = 8) -> str:
    if not items:
        items = ["0"]
    lines = [", ".join(items[i:i + per_line]) for i in range(0, len(items), per_line)]
    return f"static const {ctype} {name}[{len(items)}] = {{\n  " + ",\n  ".join(lines) + "\n};\n"


def check(forest: Forest, options: CEmitOptions) -> list[Diagnostic]:
    """What C cannot hold: everything a Forest means is expressible; only sizes and names are limited."""
    diags = []
    if not _IDENT.match(options.prefix):
        diags.append(error(f"C symbol prefix {options.prefix!r} is not a C identifier",
                           IRLocation(field="prefix"), "use letters, digits and underscores"))
    if forest.n_nodes > _INT32_MAX or forest.n_features > _INT32_MAX:
        diags.append(error(f"model too large for 32-bit node ids ({forest.n_nodes} nodes)", IRLocation()))
    if options.walk not in WALKS:
        diags.append(error(f"walk must be one of {', '.join(WALKS)}, got {options.walk!r}", IRLocation(field="walk")))
    if options.block is not None and (options.block < 8 or options.block > BLOCK_MAX):
        diags.append(error(f"block must be between 8 and {BLOCK_MAX} rows, got {options.block}",
                           IRLocation(field="block")))
    return diags


def _code_tree(lay: Layout, t: int, thr: list[str], name: str) -> str:
    """One tree as nested if/else returning its leaf slot."""
    lines = [f"static int32_t {name}(const LUMBER_IN_T *x)\n{{", "    (void)x;"]

    def visit(s: int, indent: int) -> None:
        pad = "    " * indent
        c = int(lay.child[s])
        if c == s:
            lines.append(f"{pad}return {s};")
            return
        f = int(lay.feature[s])
        fl = int(lay.flags[s])
        if fl & (FLAG_MISSING_ZERO | FLAG_CATEGORICAL):
            q = int(np.searchsorted(lay.special_slots, s))
            cond = f"lumber_go_left_special({s}, {q}, x[{f}])"
        elif fl & FLAG_MISSING_LEFT:
            cond = f"!(x[{f}] > {thr[s]})"
        else:
            cond = f"x[{f}] <= {thr[s]}"
        lines.append(f"{pad}if ({cond}) {{")
        visit(c, indent + 1)
        lines.append(f"{pad}}} else {{")
        visit(c + 1, indent + 1)
        lines.append(f"{pad}}}")

    visit(int(lay.root[t]), 1)
    lines.append("}")
    return "\n".join(lines)


def emit_source(forest: Forest, options: CEmitOptions | None = None, *, fp: str | None = None) -> Artifact:
    """The C file (and its header) for ``forest``; ``fp``: its fingerprint, when the caller already has it."""
    options = options or CEmitOptions()
    diags = check(forest, options)
    if diags:
        raise CompileError(diags)
    schema = forest.schema
    fp = fp or fingerprint(forest)
    lay = layout(forest)
    single = schema.input_dtype == "float32"
    acc_single = schema.accumulate_dtype == "float32"
    in_t = "float" if single else "double"
    acc_t = "float" if acc_single else "double"
    K = schema.n_outputs
    T = forest.n_trees
    n_slots = lay.node_of.shape[0]
    unroll = options.unroll if options.unroll is not None else forest.n_nodes <= UNROLL_MAX_NODES
    mode = lay.mode.copy()
    if unroll:
        mode = MODE_CODE | (mode & MODE_SPECIAL)
    tout = forest.tree_output
    has_scalar = bool((tout >= 0).any())
    has_vector = bool((tout < 0).any())
    has_cat = lay.cats is not None
    has_special = bool((lay.mode & MODE_SPECIAL).any())
    code_walk = options.walk == "code" and not unroll and T > 0
    bins = bin_tables(forest, lay) if options.walk != "values" and not (unroll and T > 0) else None
    if bins is None and options.walk in ("binned", "code") and not (unroll and T > 0):
        raise CompileError(f"walk={options.walk!r} needs at most 65534 distinct thresholds per feature and "
                           f"{2**16 - 1} walk columns", "use walk='values' or 'auto'")
    dec_q: npt.NDArray[np.int64] | None = None
    if bins is not None and has_special:
        dcol, dec_q = shared_decisions(lay)
        if 2 * forest.n_features + dec_q.size <= SHARED_DECISIONS_MAX_COLUMNS:
            column = bins.column.copy()
            column[lay.special_slots] = 2 * forest.n_features + dcol
            bins = dataclasses.replace(bins, column=column, row_stride=2 * forest.n_features + int(dec_q.size))
        else:
            dec_q = None
    row_walk = bins is not None and T > 0 and (dec_q is not None or not has_special)
    meta = {
        "generator": "lumber",
        "abi_version": ABI_VERSION,
        "fingerprint": fp,
        "prefix": options.prefix,
        "input_dtype": schema.input_dtype,
        "n_trees": T,
        "schema": schema.to_dict(),
    }
    from lumber import __version__

    meta["lumber_version"] = __version__
    defines = {
        "LUMBER_ABI_VERSION": str(ABI_VERSION),
        "LUMBER_IN_T": in_t,
        "LUMBER_IN_FLOAT": str(int(single)),
        "LUMBER_REFUSE_NAN": str(int(not schema.allow_nan)),
        "LUMBER_REFUSE_INF": str(int(not schema.allow_inf)),
        "LUMBER_ACC_T": acc_t,
        "LUMBER_N_FEATURES": str(forest.n_features),
        "LUMBER_ROW_STRIDE": str(lay.row_stride),
        "LUMBER_N_OUTPUTS": str(K),
        "LUMBER_N_TREES": str(T),
        "LUMBER_N_SLOTS": str(n_slots),
        "LUMBER_RULE": str(int(schema.category_rule)),
        "LUMBER_HAS_SCALAR": str(int(has_scalar)),
        "LUMBER_HAS_VECTOR": str(int(has_vector)),
        "LUMBER_HAS_SPECIAL": str(int(has_special)),
        "LUMBER_HAS_CAT": str(int(has_cat)),
        "LUMBER_HAS_FASTCAT": str(int(lay.catmask is not None)),
        "LUMBER_N_FASTCAT_FEATURES": str(lay.fastcat_features.shape[0]),
        "LUMBER_HAS_CAT_LIST": str(int(has_cat and lay.cats is not None and lay.cats.codes.size > 0)),
        "LUMBER_HAS_CODE": str(int(unroll and T > 0)),
        "LUMBER_AVERAGE": str(int(schema.average)),
        "LUMBER_TRANSFORM": str(int(schema.post_transform)),
        "LUMBER_SIGMOID_ALPHA": c_reals(np.array([schema.sigmoid_alpha]), False)[0],
        "LUMBER_ISOLATION_C": c_reals(np.array([schema.isolation_c]), False)[0],
        "LUMBER_ZERO_THRESHOLD": float(ZERO_THRESHOLD).hex(),
        "LUMBER_BLOCK": str(options.block or (CODE_WALK_BLOCK if code_walk else auto_block(bins))),
        "LUMBER_BINNED": str(int(bins is not None)),
        "LUMBER_WALK_T": f"uint{bins.bits}_t" if bins is not None else in_t,
        "LUMBER_WALK_STRIDE": str(bins.row_stride if bins is not None else lay.row_stride),
        "LUMBER_WALK_BYTES": str(bins.bits // 8 if bins is not None else 8 // (1 + single)),
        "LUMBER_WALK_CODE": str(int(code_walk)),
        "LUMBER_N_CODE_BLOCKS": str(-(-T // CODE_BLOCK_TREES) if code_walk else 0),
        "LUMBER_GLOBAL_DEC": str(int(dec_q is not None)),
        "LUMBER_N_DEC": str(0 if dec_q is None else dec_q.size),
        "LUMBER_ROW_WALK": str(int(row_walk)),
    }
    meta["walk"] = ("code" if code_walk else f"binned{bins.bits}") if bins is not None else "values"
    header = (_template("api.h").replace("@PREFIX@", options.prefix).replace("@IN_T@", in_t)
              .replace("@GUARD@", f"LUMBER_{options.prefix.upper()}_H"))
    parts: list[str] = [
        f"/* Generated by lumber {__version__}; do not edit.\n"
        f" * Model fingerprint {fp}\n"
        f" * {T} trees, {forest.n_nodes} nodes, {forest.n_features} features, {K} output(s), "
        f"{schema.input_dtype} input, {schema.accumulate_dtype} sums.\n"
        f" * Build: cc -O3 -fPIC -shared -std=c99 {options.name}.c -o lib{options.name}.so -lm\n */\n",
        "".join(f"#define {k} {v}\n" for k, v in defines.items()),
        f"#define LUMBER_FN(name) {options.prefix}_##name\n\n",
        header, "\n", _template("prelude.h"), "\n",
    ]
    parts.append(_tables(forest, lay, mode, single, acc_single, K, T, fp, json.dumps(meta, sort_keys=True,
                                                                                      default=str),
                         per_tree_decisions=dec_q is None))
    if bins is not None:
        parts.append(_bin_arrays(bins, lay.child, single))
    if dec_q is not None:
        parts.append(_array("int32_t", "L_DEC_SLOT", [str(v) for v in lay.special_slots[dec_q].tolist()], per_line=16))
        parts.append(_array("int32_t", "L_DEC_Q", [str(v) for v in dec_q.tolist()], per_line=16))
    if row_walk and bins is not None:
        parts.append(_row_groups(lay))
        roots = [f"{{{{{k}, {col}, {c}}}}}" for c, col, k in zip(lay.child[lay.root].tolist(),
                                                                 bins.column[lay.root].tolist(),
                                                                 bins.code[lay.root].tolist())]
        parts.append(_array("lumber_wnode", "L_WROOT", roots, per_line=6))
    code_defs: list[str] = []
    if unroll and T > 0:
        names = [f"lumber_tree_{t}" for t in range(T)]
        if has_special:
            parts.append("static inline int lumber_go_left_special(int32_t s, int32_t q, LUMBER_IN_T v);\n")
        parts.extend(f"static int32_t {nm}(const LUMBER_IN_T *x);\n" for nm in names)
        parts.append(f"static int32_t (*const L_TREE_FN[{T}])(const LUMBER_IN_T *) = {{\n  "
                     + ",\n  ".join(names) + "\n};\n")
        thr = c_reals(lay.threshold, single)
        code_defs = [_code_tree(lay, t, thr, names[t]) + "\n" for t in range(T)]
    if code_walk and bins is not None:
        code_defs = _code_walk(forest, lay, bins, parts, has_special and dec_q is None)
    parts.append("\n")
    parts.append(_template("runtime.c"))
    parts.extend(code_defs)
    source = "".join(parts)
    return Artifact(
        target="c-source",
        files={f"{options.name}.c": source.encode(), f"{options.name}.h": header.encode()},
        fingerprint=fp,
        metadata=meta,
    )


def _code_walk(forest: Forest, lay: Layout, bins: BinTables, parts: list[str], call_special: bool) -> list[str]:
    """``walk="code"``: trees as if/else code on the rows' threshold codes (:class:`BinTables`), the
    codes compared with integer constants, CODE_BLOCK_TREES trees per function. A function walks the
    coded rows W[0..m) through its trees in order, row by row, and adds each leaf's value to the row's
    sums (kept in registers across the trees); a node whose children are both leaves adds without a
    branch. Special nodes read their shared decision column (0 left, 1 right), or with ``call_special``
    call the reference's test on the row's value. Declarations go to ``parts``
    (before the runtime); the definitions are returned (they follow it)."""
    T = forest.n_trees
    tout = forest.tree_output.tolist()
    child = lay.child.tolist()
    col = bins.column.tolist()
    code = bins.code.tolist()
    feat = lay.feature.tolist()
    flags = lay.flags.tolist()
    special = {int(v): q for q, v in enumerate(lay.special_slots.tolist())} if call_special else {}
    n_blocks = -(-T // CODE_BLOCK_TREES)
    names = [f"lumber_code_{b}" for b in range(n_blocks)]
    sig = "(const LUMBER_WALK_T *W, const LUMBER_IN_T *X, int m, LUMBER_ACC_T *acc)"
    if call_special:
        parts.append("static inline int lumber_go_left_special(int32_t s, int32_t q, LUMBER_IN_T v);\n")
    parts.extend(f"static void {nm}{sig};\n" for nm in names)
    parts.append(f"static void (*const L_CODE_FN[{n_blocks}]){sig} = {{\n  " + ",\n  ".join(names) + "\n};\n")
    # GCC at -O2/-O3 spends 7x the time of -O1 on these long branchy functions for no faster code (measured:
    # LightGBM 500 x 63 on compas, 25 s vs 3.3 s to compile, the same time per row)
    defs = ["#if defined(__GNUC__) && !defined(__clang__)\n#pragma GCC optimize(\"O1\")\n#endif\n"]
    for b, nm in enumerate(names):
        trees = range(b * CODE_BLOCK_TREES, min(T, (b + 1) * CODE_BLOCK_TREES))
        outs = sorted({tout[t] for t in trees})
        local = outs[0] >= 0  # scalar trees only: the sums live in locals
        # the leaf table through an opaque pointer: the compiler cannot fold L[c + (test)] into a
        # branch between two constant addresses, so the last level stays branch-free
        lines = [f"static void {nm}{sig}\n{{", "(void)X;"]
        if local:
            lines += ["const LUMBER_ACC_T *L = L_LEAF_VALUE; L_OPAQUE(L);"]
        lines += ["for (int i = 0; i < m; ++i) {",
                 "const lumber_wv *w = W + (int64_t)i * L_WXS;", "(void)w;",
                 "const LUMBER_IN_T *x = X + (int64_t)i * L_F;", "(void)x;",
                 "LUMBER_ACC_T *a = acc + (int64_t)i * L_K;"]
        if local:
            lines += [f"LUMBER_ACC_T s{o} = a[{o}];" for o in outs]
        # the row's codes the block reads, loaded once into registers: a mispredicted branch then
        # resolves without waiting for a load
        used = sorted({col[s] for t in trees for s in range(int(lay.root[t]), int(lay.root[t + 1])
                                                              if t + 1 < T else len(child))
                       if child[s] != s and s not in special})
        lines += [f"int32_t c{j} = w[{j}]; L_OPAQUE(c{j});" for j in used]

        def test(s: int) -> str:
            if s in special:
                return f"!lumber_go_left_special({s}, {special[s]}, x[{feat[s]}])"
            return f"c{col[s]} > {code[s]}"

        def leaf(s: int, out: int) -> list[str]:
            if out >= 0:
                return [f"s{out} += L[{s}];" if local else f"a[{out}] += L_LEAF_VALUE[{s}];"]
            return [f"for (int k = 0; k < L_K; ++k) a[k] += L_LEAF_VECTOR[{s} * L_K + k];"]

        def visit(s: int, out: int) -> None:
            c = child[s]
            if c == s:
                lines.extend(leaf(s, out))
                return
            if out >= 0 and child[c] == c and child[c + 1] == c + 1 and not flags[s] & (
                    FLAG_MISSING_ZERO | FLAG_CATEGORICAL):
                lines.append(f"s{out} += L[{c} + ({test(s)})];" if local else
                             f"a[{out}] += L_LEAF_VALUE[{c} + ({test(s)})];")
                return
            lines.append(f"if ({test(s)}) {{")
            visit(c + 1, out)
            lines.append("} else {")
            visit(c, out)
            lines.append("}")

        for t in trees:
            visit(int(lay.root[t]), tout[t])
        if local:
            lines += [f"a[{o}] = s{o};" for o in outs]
        lines += ["}", "}\n"]
        defs.append("\n".join(lines))
    return defs


BLOCK_MAX = 16384
"""Largest ``block``; the scratch of a block is on the heap, once per call and thread."""
CODE_WALK_BLOCK = 16384
"""Auto block of code walks: many rows through one function's trees before the next, so the branch
predictor learns the trees' branches (measured: 2x less time per row than 256-row blocks)."""
BLOCK_CODE_BYTES = 16384
"""Auto block size: a block's walk codes should take about half of a 32 KiB L1 data cache."""


def auto_block(bins: BinTables | None) -> int:
    """Rows per block: 64 for value walks; for binned walks as many as fit BLOCK_CODE_BYTES (64..256)."""
    if bins is None:
        return 64
    rows = BLOCK_CODE_BYTES // max(1, bins.row_stride * bins.bits // 8)
    return max(64, min(256, rows // 16 * 16))


ROW_GROUP_TREES = 16
"""Trees a single row walks together (``L_ROW_G`` in the runtime)."""
SHARED_DECISIONS_MAX_COLUMNS = 1024
"""Binned walks of models with special nodes share their decisions (:func:`shared_decisions`) when
2 * n_features + the distinct tests fit this many code columns; else each tree decides its own
(measured: LightGBM 500 x 63 on adult, 756 columns, 30% less time per batch row shared)."""


def shared_decisions(lay: Layout) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """The distinct tests of the special nodes: per special node (in ``special_slots`` order) the index of
    its test, and per test the index of one special node that makes it. Small category sets are one test
    per feature and direction mask; zero-as-missing thresholds one per feature, missing rule and
    threshold; every other categorical node is a test of its own."""
    keys: dict[tuple[object, ...], int] = {}
    dcol = np.zeros(lay.special_slots.size, dtype=np.int64)
    reps: list[int] = []
    for q, slot in enumerate(lay.special_slots.tolist()):
        fl = int(lay.flags[slot])
        if fl & FLAG_FAST_CAT and lay.catmask is not None:
            key: tuple[object, ...] = ("mask", int(lay.feature[slot]), int(lay.catmask[slot]))
        elif not fl & FLAG_CATEGORICAL:
            key = ("zero", int(lay.feature[slot]), fl & (FLAG_MISSING_LEFT | FLAG_MISSING_ZERO),
                   float(lay.threshold[slot]))
        else:
            key = ("slot", slot)
        d = keys.setdefault(key, len(reps))
        if d == len(reps):
            reps.append(q)
        dcol[q] = d
    return dcol, np.asarray(reps, dtype=np.int64)


def _row_groups(lay: Layout) -> str:
    """Single rows: per group of ROW_GROUP_TREES trees its steps, plus bit 16 when a lopsided tree of the
    group may need more."""
    T = lay.root.shape[0]
    conv = (lay.mode & 3) == MODE_CONVERGE
    groups = []
    for g in range(T // ROW_GROUP_TREES):
        sl = slice(g * ROW_GROUP_TREES, (g + 1) * ROW_GROUP_TREES)
        groups.append(str(int(lay.steps[sl].max()) | (int(conv[sl].any()) << 16)))
    return _array("int32_t", "L_ROW_GROUP", groups, per_line=16)


def _bin_arrays(bins: BinTables, child: npt.NDArray[np.int64], single: bool) -> str:
    # slot order as L_NODES, with the same padding leaf at the end
    childs = child.tolist() + [child.shape[0]]
    nodes = [f"{{{{{k}, {col}, {c}}}}}" for c, col, k in zip(childs, bins.column.tolist() + [0],
                                                             bins.code.tolist() + [2**bins.bits - 1])]
    out = [_array("lumber_wnode", "L_WNODES", nodes, per_line=6)]
    out.append(_array("int32_t", "L_BIN_OFF", [str(v) for v in bins.offset.tolist()], per_line=16))
    out.append(_array("int32_t", "L_BIN_SIZE", [str(v) for v in bins.size.tolist()], per_line=16))
    out.append(_array("int32_t", "L_BIN_HALF", [str(v) for v in bins.half.tolist()], per_line=16))
    out.append(_array("LUMBER_IN_T", "L_BIN_VAL", c_reals(bins.values, single)))
    return "".join(out)


def _tables(forest: Forest, lay: Layout, mode: npt.NDArray[np.int64], single: bool, acc_single: bool,
            K: int, T: int, fp: str, meta_json: str, *, per_tree_decisions: bool) -> str:
    schema = forest.schema
    thr = c_reals(lay.walk_threshold, single)
    feats = lay.walk_feature.tolist()
    childs = lay.child.tolist()
    nodes = [f"{{{a}, {b}, {c}}}" for a, b, c in zip(thr, feats, childs)]
    # one padding leaf, so no compiler can prove child + 1 out of bounds in a one-leaf model
    nodes.append(f"{{NAN, 0, {len(nodes)}}}")
    out = [_array("lumber_node", "L_NODES", nodes, per_line=4)]
    out.append(_array("uint8_t", "L_FLAGS", [str(v) for v in lay.flags.tolist()] + ["1"], per_line=32))
    trees = [f"{{{r}, {o}, {s}, {m}}}" for r, o, s, m in
             zip(lay.root.tolist(), forest.tree_output.tolist(), lay.steps.tolist(), mode.tolist())]
    if not trees:
        trees = ["{0, 0, 0, 0}"]
    out.append(_array("lumber_tree", "L_TREES", trees, per_line=4))
    acc_dtype = np.float32 if acc_single else np.float64
    value = forest.value[lay.node_of].astype(acc_dtype).astype(np.float64)
    tree_of_slot = forest.node_tree[lay.node_of]
    tout = forest.tree_output
    if (tout >= 0).any():
        col = tout[tree_of_slot]
        scalar = np.where(col >= 0, value[np.arange(value.shape[0]), np.maximum(col, 0)], 0.0)
        out.append(_array("LUMBER_ACC_T", "L_LEAF_VALUE", c_reals(scalar, acc_single)))
    if (tout < 0).any():
        vec = np.where((tout[tree_of_slot] < 0)[:, None], value, 0.0).reshape(-1)
        out.append(_array("LUMBER_ACC_T", "L_LEAF_VECTOR", c_reals(vec, acc_single)))
    base = np.asarray(schema.base_score, dtype=acc_dtype).astype(np.float64)
    out.append(_array("LUMBER_ACC_T", "L_BASE", c_reals(base, acc_single)))
    if schema.average:
        from lumber.ir.interp import trees_per_output

        div = np.maximum(trees_per_output(forest), 1.0)
        out.append(_array("double", "L_DIVISOR", c_reals(div, False)))
    out.append(_array("int32_t", "L_SLOT_NODE", [str(v) for v in lay.local.tolist()], per_line=16))
    if lay.cats is not None:
        c = lay.cats
        out.append(_array("int32_t", "L_CAT_REF", [str(v) for v in c.ref.tolist()], per_line=16))
        out.append(_array("lumber_catset", "L_CAT_DESC", [f"{{{a}u, {b}u, {d}u}}" for a, b, d in c.desc.tolist()],
                          per_line=4))
        out.append(_array("uint32_t", "L_CAT_WORDS", [f"{v}u" for v in c.words.tolist()], per_line=8))
        if c.codes.size:
            out.append(_array("uint32_t", "L_CAT_LIST", [f"{v}u" for v in c.codes.tolist()], per_line=8))
    if lay.special_slots.size:
        out.append(_array("int32_t", "L_SPECIAL_OFF", [str(v) for v in lay.special_offset.tolist()], per_line=16))
        if per_tree_decisions:  # lumber_decide's list (shared decisions name their nodes in L_DEC_SLOT)
            out.append(_array("int32_t", "L_SPECIAL_SLOTS", [str(v) for v in lay.special_slots.tolist()],
                              per_line=16))
        sp = lay.special_slots
        out.append(_array("int32_t", "L_SPECIAL_FEAT", [str(v) for v in lay.feature[sp].tolist()], per_line=16))
        out.append(_array("LUMBER_IN_T", "L_SPECIAL_THR", c_reals(np.nan_to_num(lay.threshold[sp]), single)))
    if lay.catmask is not None:
        out.append(_array("uint32_t", "L_CATMASK", [f"{v}u" for v in lay.catmask.tolist()], per_line=8))
        out.append(_array("int32_t", "L_FASTCAT_FEATURES", [str(v) for v in lay.fastcat_features.tolist()]))
    out.append(f"static const char L_FINGERPRINT[] = {c_string(fp)};\n")
    out.append(f"static const char L_METADATA[] = {c_string(meta_json)};\n")
    return "".join(out)
