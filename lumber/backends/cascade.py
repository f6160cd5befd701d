"""The C library of a tolerance cascade: the tables, then the exact forest inside the band.

One shared library holds both parts of a :class:`lumber.ir.cascade.Cascade`: the (quantized) tables
emitted with prefix ``<prefix>_fast`` (:func:`lumber.backends.table_c.emit_table_source`), the forest with
``<prefix>_exact`` (:func:`lumber.backends.c.emit_source`), and a small wrapper exporting the usual
``<prefix>_predict_raw`` ABI, so :class:`lumber.backends.c.CLibrary` loads a cascade like any compiled
model. Regressors (no band) get the tables alone behind the same wrapper.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import numpy as np

from lumber import __version__
from lumber.backends.c import BuildOptions, CLibrary, CEmitOptions, build_shared, emit_source
from lumber.backends.c.emit import ABI_VERSION, c_reals, c_string
from lumber.backends.c.manifest import sign_library
from lumber.backends.table_c import TableCEmitOptions, emit_table_source
from lumber.ir import CompileError, PostTransform, Task
from lumber.ir.cascade import Cascade

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


def wrapper_source(cascade: Cascade, *, prefix: str, fp: str) -> str:
    """The C file exporting ``<prefix>_*``: tables, then the forest inside the band."""
    schema, tables, band = cascade.schema, cascade.tables, cascade.band
    if schema.n_outputs != 1:
        raise CompileError("a tolerance cascade needs a one-output model")
    if schema.post_transform not in (PostTransform.IDENTITY, PostTransform.SIGMOID, PostTransform.EXP):
        raise CompileError(f"a tolerance cascade does not support the {schema.post_transform.name} transform")
    single = schema.input_dtype == "float32"
    meta = {"generator": "lumber", "abi_version": ABI_VERSION, "fingerprint": fp, "prefix": prefix,
            "input_dtype": schema.input_dtype, "n_trees": tables.n_trees, "schema": schema.to_dict(),
            "form": "cascade" if band is not None else "tolerance-tables", "lumber_version": __version__,
            "cascade": {"band": None if band is None else list(band), "fast_trees": tables.n_trees,
                        "exact_trees": cascade.forest.n_trees, "quality": cascade.quality}}
    lo, hi = c_reals(np.array(band if band is not None else (1.0, -1.0)), False)
    text = (_WRAPPER.replace("@IN_T@", "float" if single else "double").replace("@P@", prefix)
            .replace("@LO@", lo).replace("@HI@", hi).replace("@FP@", c_string(fp))
            .replace("@META@", c_string(json.dumps(meta, sort_keys=True, default=float)))
            .replace("@ALPHA@", c_reals(np.array([schema.sigmoid_alpha]), False)[0])
            .replace("@F@", str(schema.n_features)).replace("@T@", str(tables.n_trees))
            .replace("@F32@", str(int(single))).replace("@ABI@", str(ABI_VERSION)))
    defines = f"#define LC_HAS_EXACT {int(band is not None)}\n#define LC_TRANSFORM {int(schema.post_transform)}\n"
    return f"/* Generated by lumber {__version__}; do not edit. Tolerance cascade, model fingerprint {fp}. */\n" \
        + defines + text


def build_cascade_library(cascade: Cascade, *, fp: str, prefix: str = "lumber",
                          build: BuildOptions | None = None) -> tuple[CLibrary, bytes]:
    """Link the quantized tables, the exact forest (when the cascade has a band) and the wrapper into one
    signed library; the loaded library and its bytes."""
    if cascade.schema.task not in (Task.BINARY, Task.REGRESSION) and cascade.band is not None:
        raise CompileError("a tolerance cascade decides binary classes only")
    if not cascade.tables.quantized:
        raise CompileError("a cascade's tables must be quantized before they are built (the quantize pass)")
    sources = [emit_table_source(cascade.tables, TableCEmitOptions(prefix=f"{prefix}_fast",
                                                                  source_fingerprint=fp)).text()]
    if cascade.band is not None:
        sources.append(emit_source(cascade.forest, CEmitOptions(prefix=f"{prefix}_exact"), fp=fp).text())
    sources.append(wrapper_source(cascade, prefix=prefix, fp=fp))
    with tempfile.TemporaryDirectory(prefix="lumber-cascade-") as tmp:
        so = Path(tmp, "model.so")
        build_shared(sources, so, build or BuildOptions())
        lib = CLibrary(so, prefix=prefix)
    # the manifest records the wrapper's metadata, so `lumber inspect` reads it without loading the library
    data = sign_library(lib.manifest.library, models={prefix: lib.metadata}, sources=lib.manifest.source_texts())
    return lib, data


__all__ = ["build_cascade_library", "wrapper_source"]
