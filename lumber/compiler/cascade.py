"""The tolerance cascade: fast approximate tables first, the exact forest for rows near the decision.

A fitted oblivious ensemble (:mod:`lumber.passes.transforms.oblivious_fit`)
approximates the source's margins. Its decisions can differ only where the
approximate margin ``a`` is close to the decision threshold 0: the *band*
``[lo, hi]`` reaches the farthest validation rows whose decision differs on
each side of 0 (times a safety factor), and every row with ``lo <= a <= hi`` is
recomputed by the exact forest. So on the validation rows the cascade decides exactly as the
source does, and most rows never touch the forest. A stated ``agreement`` below
1 leaves the few disagreements farthest from the decision outside the band
(the widest one alone set the band for every row: 57% of Adult's rows).

One shared library holds both parts: the tables emitted with prefix
``<prefix>_fast`` (:func:`lumber.backends.table_c.emit_table_source`), the forest
with ``<prefix>_exact`` (:func:`lumber.backends.c.emit_source`), and a small
wrapper exporting the usual ``<prefix>_predict_raw`` ABI, so
:class:`lumber.backends.c.CLibrary` loads a cascade like any compiled model.
Regressors (no decision) get the tables alone behind the same wrapper.
"""

from __future__ import annotations

import json
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from lumber.backends.c import BuildOptions, CLibrary, CEmitOptions, build_shared, emit_source
from lumber.backends.c.emit import ABI_VERSION, c_reals, c_string
from lumber.backends.c.manifest import sign_library
from lumber.backends.table_c import TableCEmitOptions, emit_table_source
from lumber.ir import CompileError, Forest, ObliviousEnsemble, PostTransform, Task, atomic_write_bytes

from lumber.runtime.predictors import CPredictor

BAND_SAFETY = 1.25
"""The band is this much wider than the widest disagreement seen on validation rows."""


Band = tuple[float, float]
"""``(lo, hi)`` with ``lo <= 0 <= hi``: rows whose approximate margin lies in ``[lo, hi]`` take the exact forest."""


def decision_band(approx: npt.NDArray[np.float64], exact: npt.NDArray[np.float64], *, ge: bool = False,
                  agreement: float = 1.0) -> Band:
    """Narrowest band (each side times :data:`BAND_SAFETY`) outside which ``approx`` decides as ``exact`` on
    these rows but for at most ``floor((1 - agreement) * n)`` of them.

    A row decides class 1 when its margin is > 0 (``margin_ge``: >= 0); rows inside the band go to the
    exact forest, so every listed row whose decision differs falls inside, except the allowed few far from
    the decision (one stray row then no longer sets the band for all). The two sides are set apart
    (errors are not symmetric around the decision); the spare rows go to the side where they narrow
    the band most, counted in rows inside.
    """
    a, e = np.asarray(approx).reshape(-1), np.asarray(exact).reshape(-1)
    differ = ((a >= 0) != (e >= 0)) if ge else ((a > 0) != (e > 0))
    spare = int(np.floor((1.0 - agreement) * a.shape[0] + 1e-9))
    up = np.sort(a[differ & (a > 0)])[::-1] * BAND_SAFETY  # decided 1, should be 0: hi must reach them
    down = np.sort(-a[differ & (a <= 0)])[::-1] * BAND_SAFETY
    side = lambda s, k: float(s[k]) if k < s.shape[0] else 0.0  # noqa: E731
    order = np.sort(a)
    best: tuple[int, float, float] | None = None
    for k_up in range(min(spare, up.shape[0]) + 1):
        hi, lo = side(up, k_up), -side(down, spare - k_up)
        inside = int(np.searchsorted(order, hi, side="right") - np.searchsorted(order, lo, side="left"))
        if best is None or inside < best[0]:
            best = (inside, lo, hi)
    assert best is not None
    eps = 1e-12 * (1.0 + float(np.abs(e).max(initial=0.0)))
    return best[1] - eps, best[2] + eps


def inside_band(approx: npt.NDArray[np.float64], band: Band) -> npt.NDArray[np.bool_]:
    """Rows whose approximate margin lies in the band (they take the exact forest)."""
    a = np.asarray(approx, dtype=np.float64).reshape(-1)
    return (a >= band[0]) & (a <= band[1])


def cascade_margins(approx: npt.NDArray[np.float64], exact_of: Any, X: npt.NDArray[Any],
                    band: Band) -> tuple[npt.NDArray[np.float64], float]:
    """The cascade's margins (``exact_of(rows)`` for rows inside the band) and the share of rows sent there."""
    a = np.asarray(approx, dtype=np.float64).reshape(-1).copy()
    inside = inside_band(a, band)
    if inside.any():
        a[inside] = np.asarray(exact_of(X[inside])).reshape(-1)
    return a, float(inside.mean()) if a.size else 0.0


@dataclass(frozen=True)
class CascadeSpec:
    """What the library records about itself (``metadata["cascade"]``)."""

    band: Band | None
    """None: tables only (regressors)."""
    fast_trees: int
    exact_trees: int
    quality: dict[str, Any]


_WRAPPER = r"""
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
typedef @IN_T@ lc_in_t;
int32_t @P@_fast_predict_raw(const lc_in_t *rows, int64_t n, double *out, int32_t threads);
void @P@_fast_predict_row(const lc_in_t *row, double *out);
int32_t @P@_fast_apply(const lc_in_t *rows, int64_t n, int32_t *out);
#if LC_HAS_EXACT
int32_t @P@_exact_predict_raw(const lc_in_t *rows, int64_t n, double *out, int32_t threads);
void @P@_exact_predict_row(const lc_in_t *row, double *out);
#endif
static const double LC_LO = @LO@, LC_HI = @HI@;
#define LC_INSIDE(m) ((m) >= LC_LO && (m) <= LC_HI)
static const char LC_FINGERPRINT[] = @FP@;
static const char LC_METADATA[] = @META@;

static double lc_transform(double m)
{
#if LC_TRANSFORM == 1
    return 1.0 / (1.0 + exp(-(@ALPHA@) * m));
#elif LC_TRANSFORM == 3
    return exp(m);
#else
    return m;
#endif
}

static int32_t lc_run(const lc_in_t *rows, int64_t n, double *out, int32_t threads, int transform)
{
    if (@P@_fast_predict_raw(rows, n, out, threads)) return 1;
#if LC_HAS_EXACT
    int64_t m = 0;
    for (int64_t i = 0; i < n; ++i) m += LC_INSIDE(out[i]);
    if (m) {
        const int64_t F = @F@;
        int64_t *idx = (int64_t *)malloc((size_t)m * sizeof(int64_t));
        lc_in_t *buf = (lc_in_t *)malloc((size_t)(m * F) * sizeof(lc_in_t));
        double *res = (double *)malloc((size_t)m * sizeof(double));
        if (!idx || !buf || !res) { free(idx); free(buf); free(res); return 1; }
        int64_t j = 0;
        for (int64_t i = 0; i < n; ++i)
            if (LC_INSIDE(out[i])) {
                idx[j] = i;
                memcpy(buf + j * F, rows + i * F, (size_t)F * sizeof(lc_in_t));
                ++j;
            }
        int32_t rc = @P@_exact_predict_raw(buf, m, res, threads);
        for (j = 0; j < m; ++j) out[idx[j]] = res[j];
        free(idx); free(buf); free(res);
        if (rc) return 1;
    }
#endif
    if (transform)
        for (int64_t i = 0; i < n; ++i) out[i] = lc_transform(out[i]);
    return 0;
}

int32_t @P@_predict_raw(const lc_in_t *rows, int64_t n, double *out, int32_t threads)
{ return lc_run(rows, n, out, threads, 0); }
int32_t @P@_predict_transformed(const lc_in_t *rows, int64_t n, double *out, int32_t threads)
{ return lc_run(rows, n, out, threads, 1); }
void @P@_predict_row(const lc_in_t *row, double *out)
{
    @P@_fast_predict_row(row, out);
#if LC_HAS_EXACT
    if (LC_INSIDE(out[0])) @P@_exact_predict_row(row, out);
#endif
}
/* leaves of the fast tables */
int32_t @P@_apply(const lc_in_t *rows, int64_t n, int32_t *out) { return @P@_fast_apply(rows, n, out); }
int32_t @P@_n_features(void) { return @F@; }
int32_t @P@_n_outputs(void) { return 1; }
int32_t @P@_n_trees(void) { return @T@; }
int32_t @P@_input_is_float32(void) { return @F32@; }
int32_t @P@_has_openmp(void)
{
#ifdef _OPENMP
    return 1;
#else
    return 0;
#endif
}
int32_t @P@_abi_version(void) { return @ABI@; }
const char *@P@_fingerprint(void) { return LC_FINGERPRINT; }
const char *@P@_metadata(void) { return LC_METADATA; }
"""


def wrapper_source(forest: Forest, tables: ObliviousEnsemble, spec: CascadeSpec, *, prefix: str, fp: str) -> str:
    """The C file exporting ``<prefix>_*``: tables, then the forest inside the band."""
    from lumber import __version__

    schema = forest.schema
    if schema.n_outputs != 1:
        raise CompileError("a tolerance cascade needs a one-output model")
    if schema.post_transform not in (PostTransform.IDENTITY, PostTransform.SIGMOID, PostTransform.EXP):
        raise CompileError(f"a tolerance cascade does not support the {schema.post_transform.name} transform")
    single = schema.input_dtype == "float32"
    meta = {"generator": "lumber", "abi_version": ABI_VERSION, "fingerprint": fp, "prefix": prefix,
            "input_dtype": schema.input_dtype, "n_trees": tables.n_trees, "schema": schema.to_dict(),
            "form": "cascade" if spec.band is not None else "tolerance-tables", "lumber_version": __version__,
            "cascade": {"band": None if spec.band is None else list(spec.band), "fast_trees": spec.fast_trees, "exact_trees": spec.exact_trees,
                        "quality": spec.quality}}
    lo, hi = c_reals(np.array(spec.band if spec.band is not None else (1.0, -1.0)), False)
    text = (_WRAPPER.replace("@IN_T@", "float" if single else "double").replace("@P@", prefix)
            .replace("@LO@", lo).replace("@HI@", hi).replace("@FP@", c_string(fp))
            .replace("@META@", c_string(json.dumps(meta, sort_keys=True, default=float)))
            .replace("@ALPHA@", c_reals(np.array([schema.sigmoid_alpha]), False)[0])
            .replace("@F@", str(schema.n_features)).replace("@T@", str(tables.n_trees))
            .replace("@F32@", str(int(single))).replace("@ABI@", str(ABI_VERSION)))
    defines = f"#define LC_HAS_EXACT {int(spec.band is not None)}\n#define LC_TRANSFORM {int(schema.post_transform)}\n"
    return f"/* Generated by lumber {__version__}; do not edit. Tolerance cascade, model fingerprint {fp}. */\n" \
        + defines + text


def build_cascade(forest: Forest, tables: ObliviousEnsemble, spec: CascadeSpec, *, fp: str,
                  path: str | Path | None = None, prefix: str = "lumber", build: BuildOptions | None = None,
                  threads: int = 1) -> CPredictor:
    """Link tables (quantized), the exact forest (when ``spec.band`` is set) and the wrapper into one library."""
    from lumber.passes.transforms.quantize import quantize_ensemble

    if tables.schema.task not in (Task.BINARY, Task.REGRESSION) and spec.band is not None:
        raise CompileError("a tolerance cascade decides binary classes only")
    q = tables if tables.quantized else quantize_ensemble(tables)
    sources = [emit_table_source(q, TableCEmitOptions(prefix=f"{prefix}_fast", source_fingerprint=fp)).text()]
    if spec.band is not None:
        sources.append(emit_source(forest, CEmitOptions(prefix=f"{prefix}_exact"), fp=fp).text())
    sources.append(wrapper_source(forest, q, spec, prefix=prefix, fp=fp))
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="lumber-cascade-") as tmp:
        so = Path(tmp, "model.so")
        build_shared(sources, so, build or BuildOptions())
        lib = CLibrary(so, prefix=prefix)
    # the manifest records the wrapper's metadata, so `lumber inspect` reads it without loading the library
    data = sign_library(lib.manifest.library, models={prefix: lib.metadata}, sources=lib.manifest.source_texts())
    pred = CPredictor(lib, data, threads=threads)
    pred.report = {"cascade": {"build_seconds": time.perf_counter() - t0}}
    if path is not None:
        atomic_write_bytes(path, data)
        pred.path = Path(path)
    return pred


__all__ = ["BAND_SAFETY", "Band", "CascadeSpec", "build_cascade", "cascade_margins", "decision_band", "inside_band",
           "wrapper_source"]
